"""The fleet's shared state: workers and their heartbeats, the schedulers' leases on jobs, and the
static-check cache.

Callers pass a ``Session`` and own the transaction (see ``db.repository``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
import sqlalchemy.orm as so

from db.models import Job
from db.models import Problem
from db.models import StaticCheck
from db.models import Worker
from db.models import utcnow


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


def drivable_job_ids(session: so.Session) -> list[int]:
    """Jobs a scheduler should drive: pending or running, or cancelled with problems open."""
    open_problem = sa.select(Problem.id).where(Problem.job_id == Job.id,
                                                Problem.status != "done").exists()
    return list(session.scalars(
        sa.select(Job.id).where(sa.or_(Job.status.in_(("pending", "running")),
                                       sa.and_(Job.status == "cancelled", open_problem)))
        .order_by(Job.id)).all())


def lease_job(session: so.Session, job_id: int, owner: str, lease_s: float) -> str | None:
    """Take or renew the driver lease of a job: ``"renewed"`` when ``owner`` held it and no
    one else has driven the job since (its in-memory state is current), ``"taken"`` when the
    job was free or its last driver's lease ran out (someone else may have driven it: rebuild
    from the database), ``None`` when another live scheduler holds it."""
    now = utcnow()
    until = now + dt.timedelta(seconds=lease_s)
    renewed = session.execute(sa.update(Job).where(Job.id == job_id, Job.driver_owner == owner)
                              .values(driver_lease_until=until))
    if renewed.rowcount:  # type: ignore[attr-defined]
        return "renewed"
    taken = session.execute(
        sa.update(Job).where(Job.id == job_id, sa.or_(
            Job.driver_owner.is_(None), Job.driver_lease_until < now))
        .values(driver_owner=owner, driver_lease_until=until))
    return "taken" if taken.rowcount else None  # type: ignore[attr-defined]


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


def cached_static(session: so.Session, key: str) -> dict[str, Any] | None:
    row = session.get(StaticCheck, key)
    return None if row is None else dict(row.result)


def cache_static(session: so.Session, key: str, target: str, result: dict[str, Any]) -> None:
    try:
        with session.begin_nested():
            session.add(StaticCheck(key=key, target=target, result=result))
    except sa.exc.IntegrityError:
        pass  # another worker checked the same config first: same answer
