"""``tuner worker``: one Celery worker process per GPU (or one for the CPU queue).

Start-up: probe the device through a bench process (the worker itself never initialises
CUDA), announce the device kind and its measured ceilings in ``tuner_workers``, start a
heartbeat thread, then run Celery with one pool process, prefetch 1, on the queue of the
device kind (a pipelined GPU worker: ``2 + compile_procs`` threads instead, see
``run_worker``). The heartbeat is what lets a scheduler requeue the trials of a worker that
vanished without waiting for their leases to run out.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
import sqlalchemy.orm as so
from celery.signals import worker_shutting_down
from sqlalchemy.pool import NullPool

from db import repository as repo
from db.migrate import ensure_schema
from db.retry import retry_db
from db.session import engine_kwargs
from db.session import make_engine
from db.session import normalise_url
from tuner.core.isolation import sandbox_mode
from tuner.core.settings import Settings
from tuner.core.target import parse_worker_device
from tuner.measure.backends.registry import make_backend
from tuner.measure.pipeline import Pipeline
from workers.celery_app import configure
from workers.tasks import ENV_COMPILE
from workers.tasks import ENV_DEVICE
from workers.tasks import ENV_NAME

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceInfo:
    device: str
    kind: str
    name: str
    ceilings: dict[str, Any]

    @property
    def queue(self) -> str:
        return parse_worker_device(self.device).queue(self.kind)


def check_device(device: str) -> str:
    """``cpu``, ``cuda:N``, or ``standin:<gpu kind>`` (a simulated GPU); ``ValueError``
    otherwise."""
    parse_worker_device(device)
    return device


def probe(device: str, settings: Settings) -> DeviceInfo:
    """Start a bench process on the device once, read its kind and ceilings, stop it."""
    backend = make_backend(str(parse_worker_device(device)),
                           cache_dir=settings.cache_dir, kernel_roots=settings.kernel_roots,
                           memory_bytes=settings.bench_memory_bytes)
    try:
        backend.start()
        info = backend.describe()
    finally:
        backend.close()
    return DeviceInfo(device, str(info.get("device_kind")), str(info.get("device_name")),
                      dict(info.get("ceilings") or {}))


def default_name(device: str) -> str:
    """``device.pid.tag@host``. The random tag keeps names apart where pid and host do not:
    every container starts its worker as PID 1, and containers on the host's network share
    its name (two such workers under one name would share a heartbeat row, so neither could
    go silent). A restarted worker gets a new name: its predecessor goes silent and that
    one's trials are requeued after three heartbeats, not at the end of their leases."""
    tag = secrets.token_hex(3)
    return f"{device.replace(':', '')}.{os.getpid()}.{tag}@{socket.gethostname()}"


class Heartbeat:
    """Refresh ``tuner_workers.last_heartbeat`` every ``interval_s`` from a daemon thread.

    Uses a connection-per-beat engine and drops it across ``fork`` so Celery's pool processes
    never share its sockets.
    """

    def __init__(self, db_url: str, name: str, interval_s: float) -> None:
        kwargs = {k: v for k, v in engine_kwargs(db_url).items()
                  if k not in ("pool_size", "max_overflow")}
        self.engine = sa.create_engine(normalise_url(db_url), poolclass=NullPool, **kwargs)
        os.register_at_fork(after_in_child=lambda: self.engine.dispose(close=False))
        self.sessions = so.sessionmaker(self.engine)
        self.name = name
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def beat(self, status: str = "alive") -> None:
        with self.sessions.begin() as session:
            repo.heartbeat(session, self.name, status)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except Exception as exc:  # the database may be away; the next beat will tell
                log.warning("heartbeat failed: %s", str(exc).splitlines()[0][:200])

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            self.beat("stopped")
        self.engine.dispose()


#: Exit status of a worker whose Celery loop ended without anyone asking it to stop.
UNEXPECTED_STOP = 3


def exit_status(celery_code: int | None, shutdown_asked: bool) -> int:
    """The worker process's exit status: Celery's own when it failed; ``UNEXPECTED_STOP`` when
    it ended cleanly but no signal asked it to (a supervisor must see a failure and restart
    it); 0 for an orderly stop that was asked for."""
    if celery_code:
        return int(celery_code)
    return 0 if shutdown_asked else UNEXPECTED_STOP


def run_celery(app: Any, argv: list[str]) -> int | None:
    """``app.worker_main(argv)``, which drops the exit status: Celery's command line run the
    way ``Celery.start`` runs it, returning the status."""
    from celery.bin.celery import celery as command
    from click.exceptions import Exit

    command.params[0].default = app
    try:
        code = command.main(args=argv, standalone_mode=False)
        return code if isinstance(code, int) else None
    except Exit as exc:
        return int(exc.exit_code)
    finally:
        command.params[0].default = None


def run_worker(settings: Settings, device: str, name: str | None = None,
               queue: str | None = None, loglevel: str = "INFO",
               compile_procs: int = 0) -> int:
    """Probe, register, heartbeat and consume until Celery shuts down (blocking); returns the
    exit status (``exit_status``).

    ``compile_procs`` > 0 on a GPU: a pipelined worker (``tuner.measure.pipeline``): Celery's
    thread pool runs ``2 + compile_procs`` tasks at once (one on the device, one compiled and
    waiting, the rest compiling), which share the device's bench process and a pool of
    ``compile_procs`` compile processes; else one prefork process, one task."""
    device = check_device(device)
    info = probe(device, settings)
    node = name or default_name(device)
    queues = [queue or info.queue]
    engine = make_engine(settings.db_url)
    try:
        retry_db(lambda: ensure_schema(engine), what="checking the schema")

        def register() -> None:
            with so.sessionmaker(engine).begin() as session:
                repo.register_worker(
                    session, name=node, host=socket.gethostname(), pid=os.getpid(),
                    device=device, device_kind=info.kind, device_name=info.name,
                    queues=queues, ceilings=info.ceilings)

        retry_db(register, what="registering the worker")
    finally:
        engine.dispose()
    log.info("worker %s: %s (%s) on queue %s", node, info.name, info.kind, queues[0])
    log.info("worker %s: %s", node, sandbox_mode())
    os.environ[ENV_DEVICE] = device
    os.environ[ENV_NAME] = node
    pipelined = compile_procs > 0 and parse_worker_device(device).on_gpu
    if pipelined:
        os.environ[ENV_COMPILE] = f"{compile_procs}:{info.kind}"
        log.info("worker %s compiles ahead in %d processes", node, compile_procs)
    heartbeat = Heartbeat(settings.db_url, node, settings.heartbeat_s)
    heartbeat.start()
    app = configure(settings)
    asked: list[int] = []

    def on_shutdown(sig: Any = None, **_: Any) -> None:
        asked.append(1)

    worker_shutting_down.connect(on_shutdown, weak=False)
    try:
        code = run_celery(app, [
            "worker", "--queues", ",".join(queues), "--hostname", node,
            "--concurrency", str(Pipeline(compile_procs if pipelined else 0).threads),
            "--pool", "threads" if pipelined else "prefork", "--prefetch-multiplier", "1",
            "--without-gossip",
            "--without-mingle", "--loglevel", loglevel,
        ])
    finally:
        heartbeat.stop()
    status = exit_status(code, bool(asked))
    if status == UNEXPECTED_STOP:
        log.error("worker %s: Celery stopped without being asked to; exiting with status %d "
                  "so that a supervisor restarts it", node, status)
    return status
