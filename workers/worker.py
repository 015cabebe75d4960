"""The worker's handling of one request: claim ▶ measure ▶ record (thin, like a web view).

Used by the inline queue's threads and by the Celery task alike. The claim is a
compare-and-set (queued → running at this attempt): a request for a cancelled, finished or
re-attempted trial is dropped without touching the device.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
from collections.abc import Callable

import sqlalchemy.orm as so

from db import repository as repo
from tuner.results import record_measurement
from tuner.types import BenchmarkRequest
from tuner.types import Measurement
from tuner.types import TrialStatus
from workers.backends.base import Backend

log = logging.getLogger(__name__)

LEASE_MARGIN_S = 60.0


def worker_name(suffix: str = "") -> str:
    return f"{socket.gethostname()}:{os.getpid()}{suffix}"


class TrialWorker:
    """Measures requests on one backend and records them in the database."""

    def __init__(self, backend: Backend, sessions: so.sessionmaker[so.Session],
                 name: str | None = None,
                 on_measured: Callable[[BenchmarkRequest, Measurement], None] | None = None,
                 ) -> None:
        self.backend = backend
        self.sessions = sessions
        self.name = name or worker_name()
        self.on_measured = on_measured

    def claim(self, request: BenchmarkRequest) -> bool:
        lease_s = request.compile_timeout_s + request.run_timeout_s + LEASE_MARGIN_S
        with self.sessions.begin() as session:
            return repo.claim_trial(session, request.trial_id, request.attempt, self.name,
                                    lease_s)

    def handle(self, request: BenchmarkRequest) -> None:
        if not self.claim(request):
            log.info("trial %s attempt %s is no longer queued; skipped", request.trial_id,
                     request.attempt)
            return
        try:
            measurement = self.backend.run(request)
        except Exception as exc:  # a backend bug must not lose the trial
            measurement = Measurement.failure(
                TrialStatus.CRASHED, f"backend error: {exc}\n{traceback.format_exc()}")
        with self.sessions.begin() as session:
            stored = record_measurement(session, request, measurement)
        if not stored:
            log.warning("result of trial %s attempt %s arrived after the trial moved on",
                        request.trial_id, request.attempt)
        if self.on_measured is not None:
            self.on_measured(request, measurement)

    def close(self) -> None:
        self.backend.close()
