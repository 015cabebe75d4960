"""What a fleet message carries: a ``Ticket`` (which trial, which delivery), never the work.

A worker reads the kernel, problem, config, timing and timeouts of a ticket from the database
when it claims it (``load_request``), so a message forged by anyone who can write to the broker
can only ask for a trial the service itself queued, exactly as the service queued it.

A ticket that cannot be turned into work for a reason no retry cures (a job spec out of
bounds, a corrupt row) is *dead-lettered* (``dead_letter``): its trial moves to the next
attempt, and once ``max_attempts`` deliveries failed it becomes ``lost`` with the error, so the
job still finishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy.orm as so

from db import repository as repo
from db.models import Problem
from db.models import Trial
from tuner.control.recording import JobIdentity
from tuner.core.limits import BOUNDS
from tuner.core.limits import MAX_ID
from tuner.core.limits import spec_errors
from tuner.core.types import BenchmarkRequest
from tuner.core.types import JobSpec
from tuner.core.types import TrialStatus

MODES = ("bench", "check", "confirm")
#: Deliveries a ticket gets when its job's own ``max_attempts`` cannot be read.
DEFAULT_MAX_DELIVERIES = 3
#: The largest attempt a ticket may carry (``--max-attempts`` is at most 20).
MAX_ATTEMPT = 1_000


class PoisonTicket(ValueError):
    """The ticket's job or trial cannot be run by any worker (the message says why)."""


@dataclass(frozen=True)
class Ticket:
    """``mode`` ``bench``/``check``: ``ref`` is a trial id; ``confirm``: a problem id.
    ``attempt``: the delivery it stands for (a stale one is dropped at the claim)."""

    mode: str
    ref: int
    attempt: int

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "ref": self.ref, "attempt": self.attempt}

    @classmethod
    def from_json(cls, data: Any) -> Ticket:
        """Strict: exactly these three fields, a known mode and ids in range."""
        if not isinstance(data, dict) or set(data) != {"mode", "ref", "attempt"}:
            raise ValueError("a ticket is {mode, ref, attempt} and nothing else")
        mode, ref, attempt = data["mode"], data["ref"], data["attempt"]
        if mode not in MODES:
            raise ValueError(f"unknown ticket mode {mode!r}")
        for value, top in ((ref, MAX_ID), (attempt, MAX_ATTEMPT)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ValueError(f"ticket ids are integers from 1 to {top}, not {value!r}")
        return cls(mode, ref, attempt)


def ticket_of(request: BenchmarkRequest) -> Ticket:
    ref = request.problem_id if request.mode == "confirm" else request.trial_id
    return Ticket(request.mode, ref, request.attempt)


def job_identity(session: so.Session, job_id: int) -> JobIdentity:
    """The identity of a job from its row; ``PoisonTicket`` when its spec is unusable."""
    job = repo.get_job(session, job_id)
    if job is None:
        raise PoisonTicket(f"job {job_id} does not exist")
    try:
        spec = JobSpec.from_json(job.spec)
    except (TypeError, ValueError) as exc:
        raise PoisonTicket(f"job {job_id} has a malformed spec: {exc}") from None
    errors = spec_errors(spec)
    if errors:
        raise PoisonTicket(f"job {job_id} is out of bounds: {'; '.join(errors)}")
    return JobIdentity(job_id, spec, job.kernel, job.kernel_source_hash, job.space_hash)


def trial_request(job: JobIdentity, t: Trial, problem: Problem) -> BenchmarkRequest:
    """The request that measures trial ``t`` (or statically checks it while ``checking``)."""
    check = job.spec.static_check
    overrides: dict[str, Any] = {}
    if t.status == TrialStatus.CHECKING and check is not None:  # compile for the target
        overrides = {"mode": "check", "device_kind": check}
    return job.request(trial_id=t.id, attempt=t.attempt, problem_id=t.problem_id,
                       problem=problem.problem, params=t.config, **overrides)


def confirm_request(job: JobIdentity, problem: Problem, top: list[Trial],
                    attempt: int) -> BenchmarkRequest:
    """The request that re-times ``top`` (best first) of ``problem`` interleaved."""
    return job.request(
        trial_id=top[0].id, attempt=attempt, problem_id=problem.id, problem=problem.problem,
        params=top[0].config, mode="confirm",
        finalists=[{"trial_id": t.id, "params": dict(t.config)} for t in top])


def load_request(session: so.Session, ticket: Ticket) -> BenchmarkRequest | None:
    """The work a ticket stands for, read from the database; ``None`` when its trial (or
    confirmation) no longer waits for this delivery. ``PoisonTicket`` when it never can run."""
    if ticket.mode == "confirm":
        problem = session.get(Problem, ticket.ref)
        if problem is None or problem.confirm_status != "pending" \
                or problem.confirm_attempt != ticket.attempt:
            return None
        job = job_identity(session, problem.job_id)
        top = list(repo.top_trials(session, problem.id, job.spec.confirm_top))
        return confirm_request(job, problem, top, ticket.attempt) if len(top) >= 2 else None
    t = session.get(Trial, ticket.ref)
    wanted = TrialStatus.CHECKING if ticket.mode == "check" else TrialStatus.QUEUED
    if t is None or t.attempt != ticket.attempt or t.status != wanted:
        return None
    problem = session.get(Problem, t.problem_id)
    if problem is None:
        raise PoisonTicket(f"trial {t.id} has no problem")
    request = trial_request(job_identity(session, t.job_id), t, problem)
    return request if request.mode == ticket.mode else None


def dead_letter(session: so.Session, ticket: Ticket, error: str) -> tuple[str, int | None]:
    """Record a delivery that failed for good; returns what became of the trial and the id
    of its job (``None`` for a confirmation or an unknown trial)."""
    if ticket.mode == "confirm":
        repo.update_problem(session, ticket.ref, confirm_status="skipped")
        return "confirmation skipped", None
    t = session.get(Trial, ticket.ref)
    if t is None:
        return "no such trial", None
    job = repo.get_job(session, t.job_id)
    raw = (job.spec or {}).get("max_attempts") if job is not None else None
    usable = raw is not None and BOUNDS["max_attempts"].error(raw) is None
    limit = int(raw) if raw is not None and usable else DEFAULT_MAX_DELIVERIES
    return repo.fail_delivery(session, t.id, ticket.attempt, error[:2000], limit), t.job_id
