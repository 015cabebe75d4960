"""Confirmation: re-time the top configs of a problem interleaved before declaring a winner.

Noise reorders close configs (DESIGN.md decision 6): the best of one pass may be second-best
the next. When a problem's search stops, its ``confirm_top`` best measured configs go back to a
worker in one request, which times them round-robin (A B C A B C …, so drift and heat hit
them alike) and reports each one's median. The winner is the fastest re-timed config; its
confirmed time and fraction are what the best-config table keeps. If the confirmation does not
come back in time, the search's own ranking stands.

A ``Confirmation`` belongs to one job's driver, which hands it the job's identity, its fenced
write transaction and its way of publishing requests; it knows nothing else of the driver.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from contextlib import AbstractContextManager

import sqlalchemy.orm as so

from db import repository as repo
from db.models import Problem
from db.models import utcnow
from tuner.control.recording import JobIdentity
from tuner.control.recording import offer_trial
from tuner.control.tickets import confirm_request
from tuner.core.types import BenchmarkRequest

CONFIRM_MARGIN_S = 120.0


class Confirmation:
    def __init__(self, job: JobIdentity,
                 transaction: Callable[[], AbstractContextManager[so.Session]],
                 publish: Callable[[list[BenchmarkRequest]], None]) -> None:
        """``transaction()``: a write transaction of the job's driver (fenced by its lease);
        ``publish(requests)``: hand requests to the job's queue."""
        self.job = job
        self.transaction = transaction
        self.publish = publish

    def in_progress(self, problem: Problem) -> bool:
        """Start the confirmation of a stopped problem, or say it is still running."""
        spec = self.job.spec
        if spec.confirm_top < 2 or problem.confirm_status in ("done", "skipped", "failed"):
            return False
        if not spec.target.has_noise:
            return False  # recorded or predicted times have no noise to confirm against
        if problem.confirm_status == "pending":
            deadline = (spec.compile_timeout_s + spec.run_timeout_s) * spec.confirm_top \
                + CONFIRM_MARGIN_S
            started = problem.confirm_started_at or utcnow()
            if utcnow() - started < dt.timedelta(seconds=deadline):
                return True
            with self.transaction() as session:
                repo.update_problem(session, problem.id, confirm_status="skipped")
            return False
        with self.transaction() as session:
            top = list(repo.top_trials(session, problem.id, spec.confirm_top))
            if len(top) < 2:
                return False
            attempt = problem.confirm_attempt + 1
            repo.update_problem(session, problem.id, confirm_status="pending",
                                confirm_attempt=attempt, confirm_started_at=utcnow())
        self.publish([confirm_request(self.job, problem, top, attempt)])
        return True

    def conclude(self, session: so.Session, problem: Problem) -> str | None:
        """Apply a finished confirmation: the fastest re-timed finalist becomes the best."""
        if problem.confirm_status == "skipped":
            return "confirmation did not come back in time: search ranking kept"
        if problem.confirm_status == "failed":
            return "confirmation failed on the worker (see its log): search ranking kept"
        if problem.confirm_status != "done":
            return None
        finalists = [t for t in repo.trials_of_problem(session, problem.id)
                     if t.confirm_ms is not None]
        if not finalists:
            return None
        winner = min(finalists, key=lambda t: t.confirm_ms or float("inf"))
        assert winner.confirm_ms is not None
        fraction = winner.roof_ms / winner.confirm_ms if winner.roof_ms else winner.fraction
        repo.update_problem(session, problem.id, best_trial_id=winner.id, best_fraction=fraction)
        if fraction is not None:
            offer_trial(session, self.job, problem, winner, fraction, winner.confirm_ms,
                        replace_from_job=True)
        ranked = sorted(finalists, key=lambda t: t.confirm_ms or float("inf"))
        order = ", ".join(f"#{t.number} {t.confirm_ms:.4g} ms" for t in ranked)
        return f"top {len(finalists)} re-timed interleaved: {order}"
