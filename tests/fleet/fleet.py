"""A real fleet for fault tests: a private PostgreSQL database and Redis, `tuner worker` and
`tuner scheduler` processes, and the checks every fault test ends with."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy as sa

from tests.conftest import ROOT
from tuner.testing.services import PostgresServer
from tuner.testing.services import RedisServer

_ids = itertools.count()


class Fleet:
    """Processes of one test, all killed at ``close``. Heartbeats every second, scheduler
    leases of 3 s and republishing after 5 s keep fault recovery within seconds."""

    def __init__(self, postgres: PostgresServer, redis: RedisServer, cache_dir: Path,
                 log_dir: Path) -> None:
        self.postgres = postgres
        self.redis = redis
        self.db_url = postgres.create_database(f"fleet_{os.getpid()}_{next(_ids)}")
        self.log_dir = log_dir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TUNER_")}
        self.env.pop("TRITON_INTERPRET", None)
        self.env.update(TUNER_DB_URL=self.db_url, TUNER_BROKER_URL=redis.url,
                        TUNER_CACHE_DIR=str(cache_dir), TUNER_KERNEL_ROOTS=str(ROOT),
                        TUNER_HEARTBEAT_S="1", TUNER_SCHEDULER_LEASE_S="3",
                        TUNER_REPUBLISH_S="5", PYTHONUNBUFFERED="1", COLUMNS="200")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.engine = sa.create_engine(self.db_url)

    # -- processes ------------------------------------------------------------------------------
    def _spawn(self, label: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{label}.log", "ab")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", *args], env=self.env,
                                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs[label] = proc
        return proc

    def start_worker(self, label: str = "w1") -> str:
        """Start a CPU worker; returns its node name once it is registered and consuming."""
        name = f"{label}@fleet"
        self._spawn(label, ["worker", "--device", "cpu", "--name", name])
        self.wait(lambda: self.log(label).count(" ready.") >= 1, 90, f"worker {label} ready")
        return name

    def start_scheduler(self, label: str = "s1") -> None:
        self._spawn(label, ["scheduler", "--poll", "0.2"])

    def kill(self, label: str, sig: int = signal.SIGKILL) -> None:
        """Signal a process group (the worker, its pool process and its bench process)."""
        proc = self.procs.pop(label)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(timeout=30)

    def log(self, label: str) -> str:
        path = self.log_dir / f"{label}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        for label in list(self.procs):
            self.kill(label, signal.SIGKILL)
        self.engine.dispose()

    # -- CLI and database -----------------------------------------------------------------------
    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tuner.cli", *args], env=self.env,
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout)

    def submit(self, kernel: str, *args: str) -> int:
        proc = self.cli("submit", kernel, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return int(proc.stdout.split()[1].rstrip(":"))

    def rows(self, sql: str, **params: object) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(sa.text(sql), params).all())

    def job_status(self, job_id: int) -> str:
        return str(self.rows("SELECT status FROM tuner_jobs WHERE id = :j", j=job_id)[0][0])

    def wait(self, predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if predicate():
                    return
            except sa.exc.OperationalError:
                pass
            time.sleep(0.2)
        logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.log_dir.glob("*.log")))
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}\n{logs}")

    def wait_finished(self, job_id: int, timeout_s: float = 180) -> None:
        def finished() -> bool:
            open_problems = self.rows(
                "SELECT count(*) FROM tuner_problems WHERE job_id = :j AND status != 'done'",
                j=job_id)[0][0]
            return self.job_status(job_id) in ("completed", "cancelled") and open_problems == 0

        self.wait(finished, timeout_s, f"job {job_id} to finish")

    def assert_exactly_once(self, job_id: int, status: str = "completed") -> None:
        """Every trial final and told once; Optuna agrees trial by trial; every stored
        measurement counted by exactly one worker."""
        assert self.job_status(job_id) == status
        trials = self.rows(
            "SELECT t.id, t.number, t.status, t.told, t.attempt, t.fraction, t.duplicate_of, "
            "p.study_name FROM tuner_trials t JOIN tuner_problems p ON p.id = t.problem_id "
            "WHERE t.job_id = :j", j=job_id)
        assert trials
        assert all(t.told and t.status not in ("queued", "running") for t in trials)
        for study_name in {t.study_name for t in trials}:
            study = optuna.load_study(study_name=study_name, storage=self.db_url)
            ours = {t.id: t for t in trials if t.study_name == study_name}
            recorded = [ot.user_attrs["tuner_trial_id"] for ot in study.trials]
            assert sorted(recorded) == sorted(ours)  # each trial recorded once in Optuna
            for ot in study.trials:
                mine = ours[ot.user_attrs["tuner_trial_id"]]
                assert ot.user_attrs["tuner_number"] == mine.number
                assert ot.user_attrs["status"] == mine.status
                complete = ot.state == optuna.trial.TrialState.COMPLETE
                assert complete == (mine.status == "ok")
                if complete:
                    assert ot.value == mine.fraction
        # Workers count the results they stored, across every job of this database. One
        # statement reads both, in one snapshot: another job may still be storing results.
        ((stored, counted),) = self.rows(
            "SELECT (SELECT count(*) FROM tuner_trials WHERE duplicate_of IS NULL AND status "
            "NOT IN ('invalid', 'cancelled', 'lost', 'queued', 'running', 'checking')), "
            "(SELECT coalesce(sum(trials_done), 0) FROM tuner_workers)")
        assert counted == stored, (counted, stored)
