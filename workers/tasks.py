"""Celery tasks: thin wrappers that decode a ticket and hand it to a ``TrialWorker``.

Each pool process builds its runtime lazily (its own database engine, its own bench
processes): nothing database- or CUDA-related crosses a ``fork``. The worker's device and name
come from the environment that ``tuner worker`` set before starting Celery.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any

import redis
from celery.signals import worker_process_shutdown
from celery.signals import worker_shutdown

from db.session import make_engine
from db.session import session_factory
from tuner.control.tickets import Ticket
from tuner.control.trial_worker import TrialWorker
from tuner.core.settings import Settings
from tuner.core.target import parse_worker_device
from tuner.measure.backends.base import Backend
from tuner.measure.backends.base import Builder
from tuner.measure.backends.pool import BackendPool
from tuner.measure.backends.registry import make_backend
from tuner.measure.pipeline import CompilePool
from tuner.measure.pipeline import Pipeline
from tuner.measure.pipeline import PipelinedBackend
from tuner.measure.pipeline import worker_backends
from tuner.measure.pipeline import worker_builders
from workers.celery_app import BENCH_TASK
from workers.celery_app import app

log = logging.getLogger(__name__)

#: Redis channel on which workers announce finished trials (payload: the job id).
DONE_CHANNEL = "tuner:trial-done"

ENV_DEVICE = "TUNER_WORKER_DEVICE"
ENV_NAME = "TUNER_WORKER_NAME"
#: ``<compile processes>:<gpu kind>`` on a pipelined worker (``workers.service.run_worker``).
ENV_COMPILE = "TUNER_WORKER_COMPILE"


class _Runtime:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.settings = Settings.from_env()
        self.engine = make_engine(self.settings.db_url)
        device = os.environ.get(ENV_DEVICE, "cpu")
        self.pool = BackendPool(str(parse_worker_device(device)), self.settings,
                                *self._pipelined(device))
        self.redis = redis.Redis.from_url(self.settings.broker_url, socket_timeout=2,
                                          socket_connect_timeout=2)
        self.worker = TrialWorker(self.pool.backend_for, session_factory(self.engine),
                                  name=os.environ.get(ENV_NAME) or None,
                                  on_finished=self.announce, close=self.pool.close,
                                  lease_runs=Pipeline(self.compile_procs).threads,
                                  builder_for=self.pool.builder_for)

    def _pipelined(self, device: str) -> tuple[dict[str, Backend], dict[str, Builder]]:
        """The device backend fed by a compile pool, and that pool as the builder for its
        kind, when the worker compiles ahead (``tuner.measure.pipeline``)."""
        procs, _, kind = os.environ.get(ENV_COMPILE, "0:").partition(":")
        self.compile_procs = int(procs or 0)
        if self.compile_procs <= 0:
            return {}, {}
        s = self.settings
        pool = CompilePool(kind, self.compile_procs, cache_dir=s.cache_dir,
                           kernel_roots=s.kernel_roots, memory_bytes=s.bench_memory_bytes)
        backend = PipelinedBackend(make_backend(device, cache_dir=s.cache_dir,
                                                kernel_roots=s.kernel_roots,
                                                memory_bytes=s.bench_memory_bytes), pool)
        return worker_backends(device, backend), worker_builders(backend)

    def announce(self, job_id: int) -> None:
        """Wake the schedulers (best effort: they poll the database anyway)."""
        with contextlib.suppress(redis.RedisError):
            self.redis.publish(DONE_CHANNEL, str(job_id))

    def close(self) -> None:
        self.worker.close()
        self.engine.dispose()


_RUNTIME: _Runtime | None = None


_RUNTIME_LOCK = threading.Lock()


def runtime() -> _Runtime:
    """This process's runtime (one per pool process; shared by a thread pool's threads)."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None or _RUNTIME.pid != os.getpid():
            _RUNTIME = _Runtime()
        return _RUNTIME


@app.task(name=BENCH_TASK, acks_late=True, reject_on_worker_lost=True)
def bench(ticket: Any) -> None:
    """Run one ticket. The message carries ``Ticket.to_json()`` (which trial, which delivery)
    and nothing else: the work itself is read from the database (``load_request``)."""
    try:
        decoded = Ticket.from_json(ticket)
    except ValueError as exc:
        log.error("dropping a malformed ticket: %s", exc)
        return
    runtime().worker.handle_ticket(decoded)


@worker_shutdown.connect  # a thread pool has no pool processes to shut down
@worker_process_shutdown.connect
def _close_runtime(**_: Any) -> None:
    if _RUNTIME is not None and _RUNTIME.pid == os.getpid():
        _RUNTIME.close()
