"""The worker's handling of one request: claim ▶ measure ▶ record (thin, like a web view).

Used by the inline queue's threads and by the Celery task alike. The claim is a
compare-and-set (queued → running at this attempt): a request for a cancelled, finished or
re-attempted trial is dropped without touching the device, which makes a duplicate delivery
harmless. Database calls are retried through short outages; the measurement is the expensive
part, so recording it is retried for longest.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import traceback
from collections.abc import Callable
from typing import Any

import sqlalchemy.orm as so

from db import repository as repo
from db.models import utcnow
from db.retry import is_transient
from db.retry import retry_db
from search_spaces import stable_hash
from tuner.control.recording import record_measurement
from tuner.control.tickets import Ticket
from tuner.control.tickets import dead_letter
from tuner.control.tickets import load_request
from tuner.control.tickets import ticket_of
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Measurement
from tuner.core.types import StaticResult
from tuner.core.types import TrialStatus
from tuner.measure.backends.base import Backend
from tuner.measure.backends.base import Builder

log = logging.getLogger(__name__)

LEASE_MARGIN_S = 60.0
CLAIM_DEADLINE_S = 60.0
RECORD_DEADLINE_S = 600.0


def worker_name(suffix: str = "") -> str:
    return f"{socket.gethostname()}:{os.getpid()}{suffix}"


def lease_seconds(request: BenchmarkRequest, runs: int = 1) -> float:
    """A trial's lease covers both timeouts plus a margin for starting the bench process; a
    pipelined worker's trial may also wait for ``runs - 1`` others to leave the device."""
    return request.compile_timeout_s + runs * request.run_timeout_s + LEASE_MARGIN_S


class TrialWorker:
    """Measures requests on the backend ``backend_for(request)`` and records them.

    ``on_finished(job_id)`` is called after a request's outcome was stored by this worker
    (a measurement, a static check or a confirmation): the fleet's workers use it to wake the
    schedulers. ``lease_runs``: how many trials may share the device ahead of one of this
    worker's (``1 + lookahead`` on a pipelined worker), which lengthens its leases.
    """

    def __init__(self, backend_for: Callable[[BenchmarkRequest], Backend],
                 sessions: so.sessionmaker[so.Session], name: str | None = None,
                 on_finished: Callable[[int], None] | None = None,
                 close: Callable[[], None] | None = None, lease_runs: int = 1,
                 builder_for: Callable[[BenchmarkRequest], Builder] | None = None) -> None:
        self.backend_for = backend_for
        self.builder_for = builder_for
        self.sessions = sessions
        self.name = name or worker_name()
        self.on_finished = on_finished
        self._close = close
        self.lease_runs = lease_runs

    def claim(self, request: BenchmarkRequest) -> bool:
        def attempt() -> bool:
            with self.sessions.begin() as session:
                return repo.claim_trial(session, request.trial_id, request.attempt, self.name,
                                        lease_seconds(request, self.lease_runs))

        return retry_db(attempt, deadline_s=CLAIM_DEADLINE_S, what="claiming a trial")

    def record(self, request: BenchmarkRequest, measurement: Measurement) -> bool:
        def attempt() -> bool:
            with self.sessions.begin() as session:
                stored = record_measurement(session, request, measurement)
                if stored:
                    repo.count_trial_done(session, self.name)
                return stored

        return retry_db(attempt, deadline_s=RECORD_DEADLINE_S, what="recording a result")

    def handle_ticket(self, ticket: Ticket) -> None:
        """Read the work of a fleet message from the database, then ``handle`` it. A ticket
        whose work cannot be read for a reason no retry cures is dead-lettered."""
        def load() -> BenchmarkRequest | None:
            with self.sessions() as session:
                return load_request(session, ticket)

        try:
            request = retry_db(load, deadline_s=CLAIM_DEADLINE_S, what="reading a ticket")
        except Exception as exc:
            if is_transient(exc):
                raise
            self.dead_letter(ticket, exc)
            return
        if request is None:
            log.info("%s %s attempt %s is no longer queued; dropped", ticket.mode, ticket.ref,
                     ticket.attempt)
            return
        self.handle(request)

    def dead_letter(self, ticket: Ticket, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {exc}"

        def store() -> tuple[str, int | None]:
            with self.sessions.begin() as session:
                return dead_letter(session, ticket, error)

        outcome, job_id = retry_db(store, deadline_s=RECORD_DEADLINE_S, what="dead-lettering")
        log.error("%s %s attempt %s cannot run (%s): %s", ticket.mode, ticket.ref,
                  ticket.attempt, outcome, error[:500])
        if self.on_finished is not None and job_id is not None:
            self.on_finished(job_id)

    def handle(self, request: BenchmarkRequest) -> None:
        if request.mode == "check":
            self.handle_check(request)
            return
        if request.mode == "confirm":
            self.handle_confirm(request)
            return
        try:
            claimed = self.claim(request)
        except Exception as exc:  # e.g. a lease that overflows: no retry will cure it
            if is_transient(exc):
                raise
            self.dead_letter(ticket_of(request), exc)
            return
        if not claimed:
            log.info("trial %s attempt %s is no longer queued; dropped", request.trial_id,
                     request.attempt)
            return
        try:
            measurement = self.backend_for(request).run(request)
        except Exception as exc:  # a backend bug must not lose the trial
            measurement = Measurement.failure(
                TrialStatus.CRASHED, f"backend error: {exc}\n{traceback.format_exc()}")
        measurement = dataclasses.replace(
            measurement, phases={**measurement.phases, "worker": self.name})
        if not self.record(request, measurement):
            # expected after a cancel or a requeue (the database kept the first result)
            log.info("result of trial %s attempt %s arrived after the trial moved on",
                     request.trial_id, request.attempt)
        elif self.on_finished is not None:
            self.on_finished(request.job_id)

    def _build(self, request: BenchmarkRequest) -> StaticResult:
        """The static check of ``request`` by the builder for its GPU kind; a worker without
        builders, or a kind no builder compiles for, answers ``crashed``."""
        if self.builder_for is None:
            return StaticResult(status="crashed", target=request.device_kind,
                                error="this worker has no compiler for static checks")
        try:
            builder = self.builder_for(request)
        except ValueError as exc:
            return StaticResult(status="crashed", target=request.device_kind, error=str(exc))
        return builder.check(request)

    def handle_check(self, request: BenchmarkRequest) -> None:
        """Compile the config for its target (or find the cached result) and move the trial
        from ``checking`` to ``queued`` or ``invalid``."""
        key = static_key(request)

        def cached() -> dict[str, Any] | None:
            with self.sessions() as session:
                return repo.cached_static(session, key)

        found = retry_db(cached, deadline_s=CLAIM_DEADLINE_S, what="reading the check cache")
        result = StaticResult.from_json(found) if found is not None else self._build(request)
        values: dict[str, Any] = {
            "static_status": result.status, "static_regs": result.regs,
            "static_spill_bytes": result.spill_bytes, "static_smem_bytes": result.smem_bytes}
        if result.launchable:
            values["status"] = str(TrialStatus.QUEUED)
        else:
            values.update(status=str(TrialStatus.INVALID), finished_at=utcnow(),
                          error=f"static check for {request.device_kind} ({result.target}): "
                                f"{result.status}: {result.error}")

        def store() -> bool:
            with self.sessions.begin() as session:
                if found is None and result.status not in ("timeout", "crashed"):
                    repo.cache_static(session, key, result.target, result.to_json())
                return repo.finish_check(session, request.trial_id, request.attempt, values)

        if retry_db(store, deadline_s=RECORD_DEADLINE_S, what="recording a static check") \
                and self.on_finished is not None:
            self.on_finished(request.job_id)

    def handle_confirm(self, request: BenchmarkRequest) -> None:
        """Re-time the finalists interleaved and store their medians (once per attempt)."""
        outcome = self.backend_for(request).confirm(request)
        if not outcome.ok:
            log.warning("confirmation of problem %s failed: %s", request.problem_id,
                        str(outcome.error)[:500])

            def store_failure() -> bool:  # the driver must not wait out the deadline
                with self.sessions.begin() as session:
                    return repo.fail_confirmation(session, request.problem_id,
                                                  request.attempt)

            if retry_db(store_failure, deadline_s=RECORD_DEADLINE_S,
                        what="recording a failed confirmation") and self.on_finished is not None:
                self.on_finished(request.job_id)
            return
        timings = [(t.trial_id, t.median_ms, t.n) for t in outcome.timings]

        def store() -> bool:
            with self.sessions.begin() as session:
                return repo.finish_confirmation(session, request.problem_id, request.attempt,
                                                timings)

        if retry_db(store, deadline_s=RECORD_DEADLINE_S, what="recording a confirmation") \
                and self.on_finished is not None:
            self.on_finished(request.job_id)

    def close(self) -> None:
        if self._close is not None:
            self._close()


def static_key(request: BenchmarkRequest) -> str:
    """Everything that changes the compiled code of a config for a target."""
    import triton

    return stable_hash({"kernel": request.kernel, "source": request.kernel_hash,
                        "problem": request.problem, "dtype": request.dtype,
                        "params": request.params, "target": request.device_kind,
                        "triton": triton.__version__})
