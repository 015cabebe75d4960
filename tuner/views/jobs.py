"""What the front ends show of the database: job summaries, and the export file.

Each function opens the existing database (``DatabaseError``, one line, when there is none or
it cannot be reached), reads, and returns plain values or detached rows; rendering is the
caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any
from typing import TypeVar

import sqlalchemy as sa
import sqlalchemy.orm as so

from db import repository as repo
from db.models import Job
from db.models import Problem
from db.models import Trial
from db.session import DatabaseError
from db.session import check_reachable
from db.session import is_missing_tables
from db.session import make_engine
from db.session import safe_url
from db.session import session_factory
from db.session import sqlite_path
from tuner.control.failures import dominant_failure
from tuner.core.device_time import DeviceTime
from tuner.core.device_time import account
from tuner.core.device_time import queue_wait_s
from tuner.core.device_time import trial_phases
from tuner.core.settings import Settings
from tuner.kernels import KernelError
from tuner.kernels import resolve_kernel
from tuner.serving.export import export_rows
from tuner.serving.export import python_module
from tuner.serving.export import write_export

T = TypeVar("T")


def open_engine(settings: Settings) -> sa.Engine:
    """An engine on an existing, reachable database (``DatabaseError`` otherwise)."""
    path = sqlite_path(settings.db_url)
    if path is not None and not path.exists():
        raise DatabaseError(f"no database at {path} yet (run `tuner tune …` or "
                            "`tuner db upgrade` first)")
    check_reachable(settings.db_url)
    return make_engine(settings.db_url)


@contextmanager
def reading(settings: Settings) -> Iterator[so.Session]:
    """A read-only session on the existing database; the engine is disposed after."""
    engine = open_engine(settings)
    try:
        with session_factory(engine)() as session:
            yield session
    finally:
        engine.dispose()


def read_rows(settings: Settings, read: Callable[[so.Session], list[T]]) -> list[T]:
    """``read(session)`` on the existing database, its rows detached; empty when the
    service's tables do not exist there yet (nothing was ever stored)."""
    try:
        with reading(settings) as session:
            rows = read(session)
            session.expunge_all()
            return rows
    except (sa.exc.OperationalError, sa.exc.ProgrammingError) as exc:
        if not is_missing_tables(exc):
            raise
        return []


@dataclass
class ProblemView:
    """A problem of a job and its best trial (``None`` until a config passed); with no best,
    its most common failure: (``status: first line``, how many share it, failures in all)."""

    problem: Problem
    best: Trial | None
    failure: tuple[str, int, int] | None = None


@dataclass
class JobSummary:
    """A job, its problems (in order) and its trials counted by status (``repeat``: repeated
    proposals answered from an earlier trial)."""

    job: Job
    problems: list[ProblemView] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    device_time: DeviceTime | None = None
    #: (trial number, status, ``trial_phases``) of the job's measured trials, in order.
    phases: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)

    @property
    def measured(self) -> int:
        return sum(p.problem.measured for p in self.problems)

    @property
    def best_fraction(self) -> float | None:
        fractions = [p.problem.best_fraction for p in self.problems
                     if p.problem.best_fraction is not None]
        return max(fractions) if fractions else None


def summarise_job(session: so.Session, job_id: int, *, trials: bool = True,
                  ) -> JobSummary | None:
    """The summary of one job (``None`` if there is none); ``trials=False`` skips the best
    trials and the counts (a cheap listing). The rows are detached from ``session``."""
    job = repo.get_job(session, job_id)
    if job is None:
        return None
    views = []
    for p in repo.problems_of(session, job_id):
        best = repo.get_trial(session, p.best_trial_id) \
            if trials and p.best_trial_id is not None else None
        failure = None
        if trials and best is None:
            failure = dominant_failure((str(t.status), t.error)
                                       for t in repo.trials_of_problem(session, p.id)
                                       if t.duplicate_of is None)
        views.append(ProblemView(p, best, failure))
    counts = repo.status_counts(session, job_id) if trials else {}
    summary = JobSummary(job, views, counts)
    if trials:
        timed = [(t, queue_wait_s(t.published_at, t.started_at))
                 for t in repo.trials_of_job(session, job_id) if t.phases]
        summary.device_time = account((t.phases, wait) for t, wait in timed)
        summary.phases = [(t.number, t.status, trial_phases(t.phases, wait))
                          for t, wait in timed]
    session.expunge_all()
    return summary



def prior_text(prior: dict[str, Any] | None) -> str:
    """One line for people: ``cold start`` or the source, the trust and the agreement, and
    whether the search dropped the prior."""
    if not prior:
        return "cold start (no prior)"
    text = str(prior.get("source", "a prior"))
    trust = prior.get("trust")
    if trust is not None:
        text += f"; trusted {trust:.0%} (share of proposals that followed it)"
    agreement = prior.get("agreement")
    if agreement is not None:
        text += f"; rank agreement with what was measured {agreement:+.2f}"
    if prior.get("dropped"):
        text += "; dropped: its picks measured below a cold start's first configs"
    return text


def summary_json(summary: JobSummary) -> dict[str, Any]:
    """A job summary as plain JSON (``tuner status --json``)."""
    job = summary.job
    return {
        "job": job.id, "kernel": job.kernel, "dtype": job.dtype, "device_kind": job.device_kind,
        "backend": job.backend, "sampler": job.sampler, "status": job.status,
        "created_at": job.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "measured": summary.measured, "best_fraction": summary.best_fraction,
        "trials_by_status": dict(summary.counts),
        "device_time": summary.device_time.to_json() if summary.device_time else None,
        "problems": [{
            "problem": dict(v.problem.problem), "key": v.problem.problem_key,
            "status": v.problem.status, "measured": v.problem.measured,
            "best_fraction": v.problem.best_fraction, "stop_reason": v.problem.stop_reason,
            "study": v.problem.study_name, "prior": v.problem.prior,
            "best_config": dict(v.best.config) if v.best is not None else None,
            "best_trial": v.best.number if v.best is not None else None,
            "failure": None if v.failure is None else {
                "example": v.failure[0], "count": v.failure[1], "failures": v.failure[2]},
        } for v in summary.problems],
    }


def job_summary(settings: Settings, job_id: int) -> JobSummary:
    """One job's summary; ``DatabaseError`` when there is no such job."""
    with reading(settings) as session:
        summary = summarise_job(session, job_id)
    if summary is None:
        raise DatabaseError(f"no job {job_id} in {safe_url(settings.db_url)}")
    return summary


def recent_jobs(settings: Settings, limit: int) -> list[JobSummary]:
    """The ``limit`` most recent jobs, newest first (without their trials); empty when
    nothing was ever stored there."""
    def read(session: so.Session) -> list[JobSummary | None]:
        return [summarise_job(session, job.id, trials=False)
                for job in repo.list_jobs(session, limit)]

    return [s for s in read_rows(settings, read) if s is not None]


def _space_defaults(kernels: set[str], settings: Settings) -> dict[str, Any]:
    """Each kernel's fallback config for the lookup's ``default`` tier: its first seed."""
    defaults = {}
    for name in sorted(kernels):
        try:
            seeds = resolve_kernel(name, "interpret", settings.kernel_roots,
                                   isolated=True).space.seed_configs()
        except KernelError:
            continue
        if seeds:
            defaults[name] = seeds[0]
    return defaults


def export_vllm_moe(settings: Settings, folder: Path, device_kind: str | None) -> list[Path]:
    """Write the stored ``fused_moe`` best configs as vLLM/SGLang config files into
    ``folder`` (``tuner.serving.vllm_moe``); the files written."""
    from tuner.serving.vllm_moe import KERNEL
    from tuner.serving.vllm_moe import write_config_files

    with reading(settings) as session:
        rows = repo.best_configs(session, kernel=KERNEL, device_kind=device_kind)
        document = export_rows(rows, safe_url(settings.db_url))
    return write_config_files(document, folder)


def export_best(settings: Settings, out: Path, kernel: str | None,
                device_kind: str | None, python: Path | None = None) -> int:
    """Write the stored best configs (optionally of one kernel or device kind) to ``out`` as
    an export document, and as a Python module to ``python``; returns how many."""
    with reading(settings) as session:
        rows = repo.best_configs(session, kernel=kernel, device_kind=device_kind)
        document = export_rows(rows, safe_url(settings.db_url))
    document["defaults"] = _space_defaults({e["kernel"] for e in document["configs"]},
                                           settings)
    write_export(document, out)
    if python is not None:
        python.parent.mkdir(parents=True, exist_ok=True)
        python.write_text(python_module(document))
    return len(document["configs"])
