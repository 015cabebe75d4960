"""Best configs: the production table, offered to race-safely and read by lookups and transfer.

Callers pass a ``Session`` and own the transaction (see ``db.repository``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
import sqlalchemy.orm as so

from db.models import BestConfig
from db.models import Job
from db.models import Problem
from db.models import Trial
from db.models import utcnow


def offer_best(session: so.Session, *, kernel: str, kernel_identity: str,
               problem: dict[str, Any],
               problem_hash: str, problem_key: str, dtype: str, device_kind: str, backend: str,
               config: dict[str, Any], fraction: float, median_ms: float, trial_id: int,
               job_id: int, fingerprint: dict[str, Any], replace_from_job: bool = False) -> bool:
    """Make this trial the best config of its key if it beats the stored one; True if it did.

    With ``replace_from_job`` it also replaces a row the same job stored (a confirmation
    re-timing overrides the search's own, noisier, figures). Race-safe: a conditional UPDATE
    first, an INSERT when no row exists, and a retry of the UPDATE if a concurrent INSERT won.
    """
    key = (BestConfig.kernel == kernel, BestConfig.kernel_identity == kernel_identity,
           BestConfig.problem_hash == problem_hash,
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
                session.add(BestConfig(kernel=kernel, kernel_identity=kernel_identity,
                                       problem_hash=problem_hash, dtype=dtype,
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


def stored_keys(session: so.Session) -> set[tuple[str, str, str]]:
    """Every (kernel, dtype, device kind) that has a stored best config."""
    rows = session.execute(sa.select(BestConfig.kernel, BestConfig.dtype,
                                     BestConfig.device_kind).distinct()).all()
    return {(str(k), str(d), str(kind)) for k, d, kind in rows}


#: Trial outcomes that say something about a config on the device that measured it.
MEASURED_OUTCOMES = ("ok", "compile_error", "out_of_resources", "wrong_result", "timeout",
                     "crashed")


def results_elsewhere(session: so.Session, kernel: str, dtype: str, problem_key: str,
                      device_kind: str, limit: int = 20_000,
                      ) -> list[tuple[dict[str, Any], float | None]]:
    """Measured (not predicted) outcomes of one kernel, dtype and problem on *other* device
    kinds: ``(config, fraction)``, ``fraction`` ``None`` for a failure; newest first."""
    rows = session.execute(
        sa.select(Trial.config, Trial.status, Trial.fraction)
        .join(Problem, Problem.id == Trial.problem_id).join(Job, Job.id == Trial.job_id)
        .where(Job.kernel == kernel, Job.dtype == dtype, Problem.problem_key == problem_key,
               Job.device_kind != device_kind, Trial.status.in_(MEASURED_OUTCOMES),
               Trial.duplicate_of.is_(None),
               sa.or_(Trial.score_basis.is_(None), Trial.score_basis != "predicted"))
        .order_by(Trial.id.desc()).limit(limit)).all()
    return [(dict(r.config), r.fraction if r.status == "ok" else None) for r in rows]
