"""Every query of the service. Callers pass a ``Session`` and own the transaction.

Writes that can race (a result delivered twice, two jobs improving the same best config) are
compare-and-set ``UPDATE … WHERE`` statements whose row count says who won; nothing here reads
a row and then writes it back unguarded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
import sqlalchemy.orm as so

from db.models import BestConfig
from db.models import Job
from db.models import Problem
from db.models import StaticCheck
from db.models import Trial
from db.models import Worker
from db.models import utcnow

ACTIVE_TRIAL_STATES = ("checking", "queued", "running")


# -- jobs -------------------------------------------------------------------------------------
def job_by_idempotency_key(session: so.Session, key: str) -> Job | None:
    return session.scalars(sa.select(Job).where(Job.idempotency_key == key)).first()


def add_job(session: so.Session, **fields: Any) -> Job:
    job = Job(**fields)
    session.add(job)
    session.flush()
    return job


def add_problem(session: so.Session, **fields: Any) -> Problem:
    problem = Problem(**fields)
    session.add(problem)
    session.flush()
    return problem


def get_job(session: so.Session, job_id: int) -> Job | None:
    return session.get(Job, job_id)


def list_jobs(session: so.Session, limit: int = 20) -> Sequence[Job]:
    return session.scalars(sa.select(Job).order_by(Job.id.desc()).limit(limit)).all()


def problems_of(session: so.Session, job_id: int) -> Sequence[Problem]:
    return session.scalars(
        sa.select(Problem).where(Problem.job_id == job_id).order_by(Problem.position)).all()


def set_job_status(session: so.Session, job_id: int, status: str,
                   error: str | None = None) -> None:
    values: dict[str, Any] = {"status": status}
    now = utcnow()
    if status == "running":
        values["started_at"] = sa.func.coalesce(Job.started_at, now)
    if status in ("completed", "failed", "cancelled"):
        values["finished_at"] = now
    if error is not None:
        values["error"] = error
    session.execute(sa.update(Job).where(Job.id == job_id).values(**values))


def cancel_job(session: so.Session, job_id: int, *, include_running: bool = False) -> int:
    """Mark the job cancelled and its queued trials ``cancelled``; returns trials cancelled.

    Running trials are left to finish (their result is still stored) unless
    ``include_running``: then they are cancelled too, and a result arriving later is refused by
    the compare-and-set. Queued ones are skipped by any worker that receives them later,
    because claiming needs status ``queued``.
    """
    session.execute(sa.update(Job).where(Job.id == job_id, Job.status.in_(
        ("pending", "running"))).values(status="cancelled", finished_at=utcnow()))
    states = ("checking", "queued", "running") if include_running else ("checking", "queued")
    result = session.execute(
        sa.update(Trial).where(Trial.job_id == job_id, Trial.status.in_(states))
        .values(status="cancelled", finished_at=utcnow(), lease_until=None,
                error="job cancelled"))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


# -- trials -----------------------------------------------------------------------------------
def add_trial(session: so.Session, **fields: Any) -> Trial:
    trial = Trial(**fields)
    session.add(trial)
    session.flush()
    return trial


def get_trial(session: so.Session, trial_id: int) -> Trial | None:
    return session.get(Trial, trial_id)


def claim_trial(session: so.Session, trial_id: int, attempt: int, owner: str,
                lease_s: float) -> bool:
    """Queued → running for this attempt. False when cancelled, already done or re-attempted."""
    now = utcnow()
    result = session.execute(
        sa.update(Trial)
        .where(Trial.id == trial_id, Trial.attempt == attempt, Trial.status == "queued")
        .values(status="running", lease_owner=owner, started_at=now,
                lease_until=now + dt.timedelta(seconds=lease_s)))
    return (result.rowcount or 0) == 1  # type: ignore[attr-defined]


def store_result(session: so.Session, trial_id: int, attempt: int,
                 values: dict[str, Any]) -> bool:
    """Write a final result if the trial is still active at ``attempt``; True if it was stored.

    This is the compare-and-set of DESIGN.md decision 1: a second delivery of the same attempt,
    or a late result of an attempt the reconciler already replaced, changes nothing.
    """
    result = session.execute(
        sa.update(Trial)
        .where(Trial.id == trial_id, Trial.attempt == attempt,
               Trial.status.in_(ACTIVE_TRIAL_STATES))
        .values(finished_at=utcnow(), lease_until=None, **values))
    return (result.rowcount or 0) == 1  # type: ignore[attr-defined]


def untold_final_trials(session: so.Session, problem_id: int) -> Sequence[Trial]:
    return session.scalars(
        sa.select(Trial)
        .where(Trial.problem_id == problem_id, Trial.told.is_(False),
               Trial.status.not_in(ACTIVE_TRIAL_STATES))
        .order_by(Trial.number)).all()


def mark_told(session: so.Session, trial_id: int) -> None:
    session.execute(sa.update(Trial).where(Trial.id == trial_id)
                    .values(told=True, told_at=utcnow()))


def count_untold(session: so.Session, problem_id: int) -> int:
    """Trials whose outcome Optuna does not have yet: in flight, or finished but not told."""
    return int(session.scalar(
        sa.select(sa.func.count()).select_from(Trial)
        .where(Trial.problem_id == problem_id, Trial.told.is_(False))) or 0)


def first_trial_with_config(session: so.Session, problem_id: int,
                            config_hash: str) -> Trial | None:
    """The earliest non-duplicate trial of this problem with this config, if any."""
    return session.scalars(
        sa.select(Trial)
        .where(Trial.problem_id == problem_id, Trial.config_hash == config_hash,
               Trial.duplicate_of.is_(None), Trial.status != "invalid")
        .order_by(Trial.number).limit(1)).first()


def trials_of_problem(session: so.Session, problem_id: int) -> Sequence[Trial]:
    return session.scalars(sa.select(Trial).where(Trial.problem_id == problem_id)
                           .order_by(Trial.number)).all()


def unmirrored_trials(session: so.Session, job_id: int,
                      limit: int) -> list[tuple[int, int, str]]:
    """(trial id, problem id, study name) of told trials of a job not yet copied into their
    Optuna study, in id order."""
    rows = session.execute(
        sa.select(Trial.id, Trial.problem_id, Problem.study_name)
        .join(Problem, Problem.id == Trial.problem_id)
        .where(Trial.job_id == job_id, Trial.told.is_(True),
               Trial.optuna_trial_id.is_(None))
        .order_by(Trial.id).limit(limit)).all()
    return [(int(t), int(p), str(name)) for t, p, name in rows]


def unmirrored_among(session: so.Session, trial_ids: Sequence[int]) -> list[Trial]:
    """Those of ``trial_ids`` still without an Optuna trial, in id order."""
    return list(session.scalars(
        sa.select(Trial).where(Trial.id.in_(trial_ids), Trial.optuna_trial_id.is_(None))
        .order_by(Trial.id)).all())


def lock_problem(session: so.Session, problem_id: int) -> None:
    """Hold the problem's row until the transaction ends (PostgreSQL; SQLite serialises
    writers by itself)."""
    session.execute(sa.select(Problem.id).where(Problem.id == problem_id).with_for_update())


def set_optuna_trial_ids(session: so.Session, pairs: Sequence[tuple[int, int]]) -> None:
    for trial_id, optuna_id in pairs:
        session.execute(sa.update(Trial).where(Trial.id == trial_id)
                        .values(optuna_trial_id=optuna_id))


def count_unmirrored(session: so.Session, job_id: int) -> int:
    return int(session.scalar(
        sa.select(sa.func.count()).select_from(Trial)
        .where(Trial.job_id == job_id, Trial.optuna_trial_id.is_(None))) or 0)


def trials_of_job(session: so.Session, job_id: int) -> Sequence[Trial]:
    return session.scalars(
        sa.select(Trial).where(Trial.job_id == job_id)
        .order_by(Trial.problem_id, Trial.number)).all()


def status_counts(session: so.Session, job_id: int) -> dict[str, int]:
    """Trials per status; repeated proposals (answered from an earlier trial) as ``repeat``."""
    rows = session.execute(
        sa.select(Trial.status, Trial.duplicate_of.is_not(None), sa.func.count())
        .where(Trial.job_id == job_id).group_by(Trial.status, Trial.duplicate_of.is_not(None))
    ).all()
    counts: dict[str, int] = {}
    for status, repeat, n in rows:
        key = "repeat" if repeat else str(status)
        counts[key] = counts.get(key, 0) + int(n)
    return counts


def update_problem(session: so.Session, problem_id: int, **values: Any) -> None:
    session.execute(sa.update(Problem).where(Problem.id == problem_id).values(**values))


# -- best configs -----------------------------------------------------------------------------
def offer_best(session: so.Session, *, kernel: str, problem: dict[str, Any],
               problem_hash: str, problem_key: str, dtype: str, device_kind: str, backend: str,
               config: dict[str, Any], fraction: float, median_ms: float, trial_id: int,
               job_id: int, fingerprint: dict[str, Any], replace_from_job: bool = False) -> bool:
    """Make this trial the best config of its key if it beats the stored one; True if it did.

    With ``replace_from_job`` it also replaces a row the same job stored (a confirmation
    re-timing overrides the search's own, noisier, figures). Race-safe: a conditional UPDATE
    first, an INSERT when no row exists, and a retry of the UPDATE if a concurrent INSERT won.
    """
    key = (BestConfig.kernel == kernel, BestConfig.problem_hash == problem_hash,
           BestConfig.dtype == dtype, BestConfig.device_kind == device_kind)
    values = dict(backend=backend, config=config, fraction=fraction, median_ms=median_ms,
                  trial_id=trial_id, job_id=job_id, fingerprint=fingerprint,
                  problem=problem, problem_key=problem_key, updated_at=utcnow())
    for _ in range(2):
        better = BestConfig.fraction < fraction
        if replace_from_job:
            better = sa.or_(better, BestConfig.job_id == job_id)
        result = session.execute(sa.update(BestConfig).where(*key, better).values(**values))
        if (result.rowcount or 0) == 1:  # type: ignore[attr-defined]
            return True
        if session.scalar(sa.select(BestConfig.id).where(*key)) is not None:
            return False
        try:
            with session.begin_nested():
                session.add(BestConfig(kernel=kernel, problem_hash=problem_hash, dtype=dtype,
                                       device_kind=device_kind, **values))
            return True
        except sa.exc.IntegrityError:
            continue
    return False


def best_configs(session: so.Session, *, kernel: str | None = None,
                 device_kind: str | None = None) -> Sequence[BestConfig]:
    query = sa.select(BestConfig).order_by(BestConfig.kernel, BestConfig.device_kind,
                                           BestConfig.dtype, BestConfig.problem_key)
    if kernel is not None:
        query = query.where(BestConfig.kernel == kernel)
    if device_kind is not None:
        query = query.where(BestConfig.device_kind == device_kind)
    return session.scalars(query).all()


def best_configs_of(session: so.Session, kernel: str, dtype: str) -> Sequence[BestConfig]:
    """Every stored best config of a kernel and dtype (all problems and device kinds)."""
    return session.scalars(sa.select(BestConfig).where(
        BestConfig.kernel == kernel, BestConfig.dtype == dtype)).all()


def expire_leases(session: so.Session, job_id: int, max_attempts: int,
                  stale_owners: Sequence[str] = ()) -> tuple[list[Trial], list[Trial]]:
    """Trials whose worker vanished (running past their lease, or held by a worker whose
    heartbeat went stale): requeue at attempt + 1, or mark ``lost`` once ``max_attempts``
    deliveries failed. Returns (requeued, lost)."""
    now = utcnow()
    vanished = Trial.lease_until < now
    if stale_owners:
        vanished = sa.or_(vanished, Trial.lease_owner.in_(list(stale_owners)))
    expired = session.scalars(
        sa.select(Trial).where(Trial.job_id == job_id, Trial.status == "running",
                               vanished)).all()
    requeued: list[Trial] = []
    lost: list[Trial] = []
    for t in expired:
        guard = (Trial.id == t.id, Trial.attempt == t.attempt, Trial.status == "running")
        if t.attempt >= max_attempts:
            result = session.execute(sa.update(Trial).where(*guard).values(
                status="lost", finished_at=now, lease_until=None,
                error=f"worker {t.lease_owner} vanished; {t.attempt} attempt(s) made"))
            if result.rowcount:  # type: ignore[attr-defined]
                lost.append(t)
        else:
            result = session.execute(sa.update(Trial).where(*guard).values(
                status="queued", attempt=t.attempt + 1, lease_owner=None, lease_until=None,
                started_at=None, published_at=None))
            if result.rowcount:  # type: ignore[attr-defined]
                session.refresh(t)
                requeued.append(t)
    return requeued, lost


def queued_trials(session: so.Session, job_id: int) -> Sequence[Trial]:
    """Trials waiting for a worker: queued, or waiting for their static check."""
    return session.scalars(
        sa.select(Trial).where(Trial.job_id == job_id,
                               Trial.status.in_(("checking", "queued")))
        .order_by(Trial.id)).all()


# -- publishing -------------------------------------------------------------------------------
def mark_published(session: so.Session, trial_ids: Sequence[int]) -> None:
    if trial_ids:
        session.execute(sa.update(Trial).where(Trial.id.in_(list(trial_ids)))
                        .values(published_at=utcnow()))


def unpublished_or_stale(session: so.Session, job_id: int,
                         older_than: dt.datetime | None) -> Sequence[Trial]:
    """Queued (or checking) trials never published, or — with ``older_than`` — published
    before it and still unclaimed (the message may have died with a broker that keeps nothing
    on disk)."""
    unpublished: sa.ColumnElement[bool] = Trial.published_at.is_(None)
    if older_than is not None:
        unpublished = sa.or_(unpublished, Trial.published_at < older_than)
    return session.scalars(
        sa.select(Trial).where(Trial.job_id == job_id,
                               Trial.status.in_(("checking", "queued")), unpublished)
        .order_by(Trial.id)).all()


# -- workers ----------------------------------------------------------------------------------
def register_worker(session: so.Session, **fields: Any) -> Worker:
    """Insert or refresh the row of a worker (keyed by its node name)."""
    worker = session.scalars(sa.select(Worker).where(Worker.name == fields["name"])).first()
    if worker is None:
        worker = Worker(**fields)
        session.add(worker)
    else:
        for key, value in fields.items():
            setattr(worker, key, value)
        worker.started_at = utcnow()
    worker.last_heartbeat = utcnow()
    worker.status = "alive"
    session.flush()
    return worker


def heartbeat(session: so.Session, name: str, status: str = "alive") -> None:
    session.execute(sa.update(Worker).where(Worker.name == name)
                    .values(last_heartbeat=utcnow(), status=status))


def count_trial_done(session: so.Session, name: str) -> None:
    session.execute(sa.update(Worker).where(Worker.name == name)
                    .values(trials_done=Worker.trials_done + 1))


def list_workers(session: so.Session) -> Sequence[Worker]:
    return session.scalars(sa.select(Worker).order_by(Worker.device_kind, Worker.name)).all()


def stale_workers(session: so.Session, silent_since: dt.datetime) -> list[str]:
    """Names of workers that stopped cleanly or whose last heartbeat is older than the cut."""
    return list(session.scalars(sa.select(Worker.name).where(sa.or_(
        Worker.last_heartbeat < silent_since, Worker.status == "stopped"))).all())


# -- scheduler leases on jobs -----------------------------------------------------------------
def drivable_job_ids(session: so.Session) -> list[int]:
    """Jobs a scheduler should drive: pending or running, or cancelled with problems open."""
    open_problem = sa.select(Problem.id).where(Problem.job_id == Job.id,
                                                Problem.status != "done").exists()
    return list(session.scalars(
        sa.select(Job.id).where(sa.or_(Job.status.in_(("pending", "running")),
                                       sa.and_(Job.status == "cancelled", open_problem)))
        .order_by(Job.id)).all())


def lease_job(session: so.Session, job_id: int, owner: str, lease_s: float) -> bool:
    """Take or renew the driver lease of a job; False if another live scheduler holds it."""
    now = utcnow()
    result = session.execute(
        sa.update(Job).where(Job.id == job_id, sa.or_(
            Job.driver_owner.is_(None), Job.driver_owner == owner, Job.driver_lease_until < now))
        .values(driver_owner=owner, driver_lease_until=now + dt.timedelta(seconds=lease_s)))
    return (result.rowcount or 0) == 1  # type: ignore[attr-defined]


def hold_lease(session: so.Session, job_id: int, owner: str, lease_s: float) -> bool:
    """Renew the lease only if ``owner`` still holds it; False once another scheduler took the
    job over. The job's row stays locked until the transaction ends, so a takeover
    (``lease_job``) waits for it: writes made under a held lease never interleave with the
    next driver's."""
    result = session.execute(
        sa.update(Job).where(Job.id == job_id, Job.driver_owner == owner)
        .values(driver_lease_until=utcnow() + dt.timedelta(seconds=lease_s)))
    return (result.rowcount or 0) == 1  # type: ignore[attr-defined]


def release_job(session: so.Session, job_id: int, owner: str) -> None:
    session.execute(sa.update(Job).where(Job.id == job_id, Job.driver_owner == owner)
                    .values(driver_owner=None, driver_lease_until=None))


# -- static checks ----------------------------------------------------------------------------
def cached_static(session: so.Session, key: str) -> dict[str, Any] | None:
    row = session.get(StaticCheck, key)
    return None if row is None else dict(row.result)


def cache_static(session: so.Session, key: str, target: str, result: dict[str, Any]) -> None:
    try:
        with session.begin_nested():
            session.add(StaticCheck(key=key, target=target, result=result))
    except sa.exc.IntegrityError:
        pass  # another worker checked the same config first: same answer


def finish_check(session: so.Session, trial_id: int, attempt: int,
                 values: dict[str, Any]) -> bool:
    """checking → queued (to be published) or invalid; only once, for this attempt."""
    result = session.execute(
        sa.update(Trial).where(Trial.id == trial_id, Trial.attempt == attempt,
                               Trial.status == "checking")
        .values(published_at=None, **values))
    return (result.rowcount or 0) == 1  # type: ignore[attr-defined]


# -- confirmation -----------------------------------------------------------------------------
def finish_confirmation(session: so.Session, problem_id: int, attempt: int,
                        timings: Sequence[tuple[int, float, int]]) -> bool:
    """Store the re-measured (trial id, median ms, n) of the finalists, once per attempt."""
    result = session.execute(
        sa.update(Problem).where(Problem.id == problem_id, Problem.confirm_status == "pending",
                                 Problem.confirm_attempt == attempt)
        .values(confirm_status="done"))
    if (result.rowcount or 0) != 1:  # type: ignore[attr-defined]
        return False
    for trial_id, median_ms, n in timings:
        session.execute(sa.update(Trial).where(Trial.id == trial_id)
                        .values(confirm_ms=median_ms, confirm_n=n))
    return True


def top_trials(session: so.Session, problem_id: int, k: int) -> Sequence[Trial]:
    """The ``k`` best measured (not repeated) ok trials of a problem by roofline fraction."""
    return session.scalars(
        sa.select(Trial).where(Trial.problem_id == problem_id, Trial.status == "ok",
                               Trial.duplicate_of.is_(None), Trial.fraction.is_not(None))
        .order_by(Trial.fraction.desc()).limit(k)).all()
