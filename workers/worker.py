"""The worker's handling of one request: claim ▶ measure ▶ record (thin, like a web view).

Used by the inline queue's threads and by the Celery task alike. The claim is a
compare-and-set (queued → running at this attempt): a request for a cancelled, finished or
re-attempted trial is dropped without touching the device, which makes a duplicate delivery
harmless. Database calls are retried through short outages; the measurement is the expensive
part, so recording it is retried for longest.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
from collections.abc import Callable

import sqlalchemy.orm as so

from db import repository as repo
from db.retry import retry_db
from tuner.results import record_measurement
from tuner.types import BenchmarkRequest
from tuner.types import Measurement
from tuner.types import TrialStatus
from workers.backends.base import Backend

log = logging.getLogger(__name__)

LEASE_MARGIN_S = 60.0
CLAIM_DEADLINE_S = 60.0
RECORD_DEADLINE_S = 600.0


def worker_name(suffix: str = "") -> str:
    return f"{socket.gethostname()}:{os.getpid()}{suffix}"


def lease_seconds(request: BenchmarkRequest) -> float:
    """A trial's lease covers both timeouts plus a margin for starting the bench process."""
    return request.compile_timeout_s + request.run_timeout_s + LEASE_MARGIN_S


class TrialWorker:
    """Measures requests on the backend ``backend_for(request)`` and records them."""

    def __init__(self, backend_for: Callable[[BenchmarkRequest], Backend],
                 sessions: so.sessionmaker[so.Session], name: str | None = None,
                 on_recorded: Callable[[BenchmarkRequest, Measurement], None] | None = None,
                 close: Callable[[], None] | None = None) -> None:
        self.backend_for = backend_for
        self.sessions = sessions
        self.name = name or worker_name()
        self.on_recorded = on_recorded
        self._close = close

    @classmethod
    def single(cls, backend: Backend, sessions: so.sessionmaker[so.Session],
               name: str | None = None) -> TrialWorker:
        """A worker with one backend (the inline queue: one bench process per thread)."""
        return cls(lambda _request: backend, sessions, name, close=backend.close)

    def claim(self, request: BenchmarkRequest) -> bool:
        def attempt() -> bool:
            with self.sessions.begin() as session:
                return repo.claim_trial(session, request.trial_id, request.attempt, self.name,
                                        lease_seconds(request))

        return retry_db(attempt, deadline_s=CLAIM_DEADLINE_S, what="claiming a trial")

    def record(self, request: BenchmarkRequest, measurement: Measurement) -> bool:
        def attempt() -> bool:
            with self.sessions.begin() as session:
                stored = record_measurement(session, request, measurement)
                if stored:
                    repo.count_trial_done(session, self.name)
                return stored

        return retry_db(attempt, deadline_s=RECORD_DEADLINE_S, what="recording a result")

    def handle(self, request: BenchmarkRequest) -> None:
        if not self.claim(request):
            log.info("trial %s attempt %s is no longer queued; dropped", request.trial_id,
                     request.attempt)
            return
        try:
            measurement = self.backend_for(request).run(request)
        except Exception as exc:  # a backend bug must not lose the trial
            measurement = Measurement.failure(
                TrialStatus.CRASHED, f"backend error: {exc}\n{traceback.format_exc()}")
        if not self.record(request, measurement):
            log.warning("result of trial %s attempt %s arrived after the trial moved on",
                        request.trial_id, request.attempt)
        elif self.on_recorded is not None:
            self.on_recorded(request, measurement)

    def close(self) -> None:
        if self._close is not None:
            self._close()
