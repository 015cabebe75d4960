"""Trials: the claim and the compare-and-set result write of a delivery, what the driver tells and
publishes, the reconciler's lease expiry, and which trials are mirrored into Optuna.

Callers pass a ``Session`` and own the transaction (see ``db.repository``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
import sqlalchemy.orm as so

from db.models import Problem
from db.models import Trial
from db.models import utcnow

ACTIVE_TRIAL_STATES = ("checking", "queued", "running")


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


def top_trials(session: so.Session, problem_id: int, k: int) -> Sequence[Trial]:
    """The ``k`` best measured (not repeated) ok trials of a problem by roofline fraction."""
    return session.scalars(
        sa.select(Trial).where(Trial.problem_id == problem_id, Trial.status == "ok",
                               Trial.duplicate_of.is_(None), Trial.fraction.is_not(None))
        .order_by(Trial.fraction.desc()).limit(k)).all()


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


def finish_check(session: so.Session, trial_id: int, attempt: int,
                 values: dict[str, Any]) -> bool:
    """checking → queued (to be published) or invalid; only once, for this attempt."""
    result = session.execute(
        sa.update(Trial).where(Trial.id == trial_id, Trial.attempt == attempt,
                               Trial.status == "checking")
        .values(published_at=None, **values))
    return (result.rowcount or 0) == 1  # type: ignore[attr-defined]


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


def set_optuna_trial_ids(session: so.Session, pairs: Sequence[tuple[int, int]]) -> None:
    for trial_id, optuna_id in pairs:
        session.execute(sa.update(Trial).where(Trial.id == trial_id)
                        .values(optuna_trial_id=optuna_id))


def count_unmirrored(session: so.Session, job_id: int) -> int:
    return int(session.scalar(
        sa.select(sa.func.count()).select_from(Trial)
        .where(Trial.job_id == job_id, Trial.optuna_trial_id.is_(None))) or 0)


def fail_delivery(session: so.Session, trial_id: int, attempt: int, error: str,
                  max_attempts: int) -> str:
    """A delivery of ``attempt`` failed for a reason no retry cures: requeue the trial at the
    next attempt, or mark it ``lost`` with ``error`` once ``max_attempts`` were made. Returns
    what happened (``requeued``, ``lost`` or ``moved on`` when the trial had moved on)."""
    guard = (Trial.id == trial_id, Trial.attempt == attempt,
             Trial.status.in_(ACTIVE_TRIAL_STATES))
    if attempt >= max_attempts:
        result = session.execute(sa.update(Trial).where(*guard).values(
            status="lost", finished_at=utcnow(), lease_until=None,
            error=f"dead-lettered after {attempt} failed deliveries: {error}"))
        return "lost" if result.rowcount else "moved on"  # type: ignore[attr-defined]
    result = session.execute(sa.update(Trial).where(*guard).values(
        attempt=attempt + 1, lease_owner=None, lease_until=None, started_at=None,
        published_at=None, error=f"delivery {attempt} failed: {error}",
        status=sa.case((Trial.status == "running", "queued"), else_=Trial.status)))
    return "requeued" if result.rowcount else "moved on"  # type: ignore[attr-defined]
