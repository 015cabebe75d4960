"""Jobs and their problems: creation, status, cancellation, the problem rows a driver updates, and
a finished confirmation.

Callers pass a ``Session`` and own the transaction (see ``db.repository``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
import sqlalchemy.orm as so

from db.models import Job
from db.models import Problem
from db.models import Trial
from db.models import Worker
from db.models import utcnow


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


def cancel_job(session: so.Session, job_id: int, *, include_running: bool = False,
               live_since: dt.datetime | None = None) -> int:
    """Mark the job cancelled and its queued trials ``cancelled``; returns trials cancelled.

    Running trials are left to finish (their result is still stored) unless
    ``include_running``: then they are cancelled too, and a result arriving later is refused by
    the compare-and-set. Queued ones are skipped by any worker that receives them later,
    because claiming needs status ``queued``. With ``live_since``, running trials held by
    no worker whose heartbeat is at least that recent are cancelled too.
    """
    session.execute(sa.update(Job).where(Job.id == job_id, Job.status.in_(
        ("pending", "running"))).values(status="cancelled", finished_at=utcnow()))
    states = ("checking", "queued", "running") if include_running else ("checking", "queued")
    which: sa.ColumnElement[bool] = Trial.status.in_(states)
    if not include_running and live_since is not None:
        # A running trial no live fleet worker holds (its lease ran out, or its owner is an
        # embedded ``tuner tune`` that was killed) would stay ``running`` for ever.
        live = sa.select(Worker.name).where(Worker.status == "alive",
                                            Worker.last_heartbeat >= live_since)
        which = sa.or_(which, sa.and_(Trial.status == "running", sa.or_(
            Trial.lease_until < utcnow(), Trial.lease_owner.is_(None),
            Trial.lease_owner.not_in(live))))
    result = session.execute(
        sa.update(Trial).where(Trial.job_id == job_id, which)
        .values(status="cancelled", finished_at=utcnow(), lease_until=None,
                error="job cancelled"))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def update_problem(session: so.Session, problem_id: int, **values: Any) -> None:
    session.execute(sa.update(Problem).where(Problem.id == problem_id).values(**values))


def lock_problem(session: so.Session, problem_id: int) -> None:
    """Hold the problem's row until the transaction ends (PostgreSQL; SQLite serialises
    writers by itself)."""
    session.execute(sa.select(Problem.id).where(Problem.id == problem_id).with_for_update())


def fail_confirmation(session: so.Session, problem_id: int, attempt: int) -> bool:
    """A confirmation that came back without timings (its worker could not re-time them):
    ``failed``, once per attempt, so the driver keeps the search's ranking at once."""
    result = session.execute(
        sa.update(Problem).where(Problem.id == problem_id, Problem.confirm_status == "pending",
                                 Problem.confirm_attempt == attempt)
        .values(confirm_status="failed"))
    return (result.rowcount or 0) == 1  # type: ignore[attr-defined]


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
