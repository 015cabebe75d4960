"""Database checks of the compose check, run on the host against the stack's PostgreSQL.

Connects as the row-only service role, from the URL in the file ``TUNER_DB_URL_FILE`` names
(never a command line). Each command prints one line; a failed check prints ``error: …`` and
exits 1.

  running JOB                   "<trial id> <worker name>" of a running trial, or nothing
  wait-finished JOB SECONDS     until the job is completed and every problem done
  exactly-once JOB TRIALS [TRIAL WORKER]
                                every trial final and told once, as many as asked for, Optuna
                                agreeing trial by trial, every stored result counted by exactly
                                one worker; TRIAL (killed on WORKER) ended on another worker,
                                at a later attempt
  kill-running JOB SECONDS NAME=CONTAINER…
                                waits for a trial of JOB running on one of the named workers,
                                then `docker kill`s that worker's container (SIGKILL: main,
                                pool and bench processes at once) and prints
                                "<trial id> <worker name> <container>"
  counts                        "jobs=… trials=…", to compare across a restart
  least-privilege               the service role is no superuser and may not create tables
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy as sa


class CheckFailed(Exception):
    """A check that did not hold; its message is the one line printed."""


def engine() -> sa.Engine:
    url_file = os.environ.get("TUNER_DB_URL_FILE", "")
    if not url_file:
        raise CheckFailed("TUNER_DB_URL_FILE is not set")
    url = Path(url_file).read_text().splitlines()[0].strip()
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def rows(db: sa.Engine, sql: str, **params: Any) -> list[Any]:
    with db.connect() as conn:
        return list(conn.execute(sa.text(sql), params).all())


def running(db: sa.Engine, job: int) -> str:
    found = rows(db, "SELECT id, lease_owner FROM tuner_trials WHERE job_id = :j AND "
                     "status = 'running' ORDER BY id LIMIT 1", j=job)
    return f"{found[0][0]} {found[0][1]}" if found else ""


def kill_running(db: sa.Engine, job: int, timeout_s: float, workers: dict[str, str]) -> str:
    """Polls every 50 ms: a trial of the interpreter can be over within a second."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = rows(db, "SELECT id, lease_owner FROM tuner_trials WHERE job_id = :j AND "
                         "status = 'running'", j=job)
        for trial, owner in found:
            if owner in workers:
                subprocess.run(["docker", "kill", workers[owner]], check=True,
                               capture_output=True)
                return f"{trial} {owner} {workers[owner]}"
        time.sleep(0.05)
    raise CheckFailed(f"no trial of job {job} ran on {sorted(workers)} within {timeout_s:.0f} s")


def wait_finished(db: sa.Engine, job: int, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    status = "missing"
    while time.monotonic() < deadline:
        found = rows(db, "SELECT status, (SELECT count(*) FROM tuner_problems p WHERE "
                         "p.job_id = j.id AND p.status != 'done') FROM tuner_jobs j "
                         "WHERE id = :j", j=job)
        if found:
            status, open_problems = found[0]
            if status in ("completed", "cancelled", "failed") and open_problems == 0:
                return f"job {job} {status}"
        time.sleep(1)
    raise CheckFailed(f"job {job} not finished after {timeout_s:.0f} s (status {status})")


def exactly_once(db: sa.Engine, job: int, wanted: int, killed: int | None,
                 killed_on: str | None) -> str:
    """The checks of tests/fleet/fleet.py (``Fleet.assert_exactly_once``), on the stack."""
    (status,) = rows(db, "SELECT status FROM tuner_jobs WHERE id = :j", j=job)[0]
    if status != "completed":
        raise CheckFailed(f"job {job} is {status}, not completed")
    trials = rows(db, "SELECT t.id, t.number, t.status, t.told, t.attempt, t.fraction, "
                      "t.lease_owner, t.duplicate_of, p.study_name FROM tuner_trials t "
                      "JOIN tuner_problems p ON p.id = t.problem_id WHERE t.job_id = :j", j=job)
    measured = [t for t in trials
                if t.duplicate_of is None and t.status not in ("invalid", "cancelled")]
    if len(measured) != wanted:
        raise CheckFailed(f"job {job}: {len(measured)} measured trials, {wanted} asked for")
    open_ = [t.id for t in trials if not t.told or t.status in ("queued", "running")]
    if open_:
        raise CheckFailed(f"job {job}: trials {open_} not final or not told")
    numbers = [(t.study_name, t.number) for t in trials]
    if len(set(numbers)) != len(numbers):
        raise CheckFailed(f"job {job}: a trial number appears twice")
    storage = optuna.storages.RDBStorage(str(db.url.render_as_string(hide_password=False)))
    for study_name in {t.study_name for t in trials}:
        study = optuna.load_study(study_name=study_name, storage=storage)
        ours = {t.id: t for t in trials if t.study_name == study_name}
        recorded = [ot.user_attrs["tuner_trial_id"] for ot in study.trials]
        if sorted(recorded) != sorted(ours):
            raise CheckFailed(f"{study_name}: Optuna holds trials {sorted(recorded)}, "
                              f"the service {sorted(ours)}")
        for ot in study.trials:
            mine = ours[ot.user_attrs["tuner_trial_id"]]
            complete = ot.state == optuna.trial.TrialState.COMPLETE
            if ot.user_attrs["status"] != mine.status or complete != (mine.status == "ok") \
                    or (complete and ot.value != mine.fraction):
                raise CheckFailed(f"{study_name}: Optuna trial {ot.number} disagrees with "
                                  f"trial {mine.id}")
    ((stored, counted),) = rows(
        db, "SELECT (SELECT count(*) FROM tuner_trials WHERE duplicate_of IS NULL AND status "
            "NOT IN ('invalid', 'cancelled', 'lost', 'queued', 'running', 'checking')), "
            "(SELECT coalesce(sum(trials_done), 0) FROM tuner_workers)")
    if counted != stored:
        raise CheckFailed(f"workers counted {counted} results, the database stores {stored}")
    detail = f"{len(measured)} measured trials, each told once; workers counted {counted} = stored"
    if killed is not None:
        trial = next((t for t in trials if t.id == killed), None)
        if trial is None or trial.attempt < 2 or trial.lease_owner == killed_on:
            raise CheckFailed(f"trial {killed} (killed on {killed_on}) was not re-run "
                              f"elsewhere: {trial}")
        detail += (f"; trial {killed} killed on {killed_on}, re-run as attempt "
                   f"{trial.attempt} on {trial.lease_owner}: {trial.status}")
    return detail


def counts(db: sa.Engine) -> str:
    ((jobs, trials, ok),) = rows(
        db, "SELECT (SELECT count(*) FROM tuner_jobs), (SELECT count(*) FROM tuner_trials), "
            "(SELECT count(*) FROM tuner_trials WHERE status = 'ok')")
    return f"jobs={jobs} trials={trials} ok={ok}"


def least_privilege(db: sa.Engine) -> str:
    with db.connect() as conn:
        user, superuser = conn.execute(sa.text(
            "SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user")).one()
        if superuser:
            raise CheckFailed(f"the service connects as {user}, a superuser")
        try:
            conn.execute(sa.text("CREATE TABLE compose_check_probe (x int)"))
        except sa.exc.ProgrammingError:
            conn.rollback()
        else:
            conn.rollback()
            raise CheckFailed(f"{user} may create tables")
    return f"{user}: no superuser, CREATE TABLE refused"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    try:
        db = engine()
        if command == "running":
            out = running(db, int(args[0]))
        elif command == "kill-running":
            out = kill_running(db, int(args[0]), float(args[1]),
                               dict(a.split("=", 1) for a in args[2:]))
        elif command == "wait-finished":
            out = wait_finished(db, int(args[0]), float(args[1]))
        elif command == "exactly-once":
            killed = int(args[2]) if len(args) > 2 else None
            out = exactly_once(db, int(args[0]), int(args[1]), killed,
                               args[3] if len(args) > 3 else None)
        elif command == "counts":
            out = counts(db)
        elif command == "least-privilege":
            out = least_privilege(db)
        else:
            print(f"error: unknown command {command}", file=sys.stderr)
            return 2
    except CheckFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (IndexError, ValueError) as exc:
        print(f"error: bad arguments for {command}: {exc}", file=sys.stderr)
        return 2
    except (OSError, subprocess.CalledProcessError, sa.exc.SQLAlchemyError) as exc:
        print(f"error: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    if out:
        print(out)
    return 0


if __name__ == "__main__":
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sys.exit(main(sys.argv[1:]))
