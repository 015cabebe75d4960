"""The fleet: submit, cancel and watch jobs; run a scheduler or a worker process.

A submitted job is only rows in the database: schedulers (``run_scheduler``) drive it through
Celery on Redis to the workers (``run_worker``), which measure and record. Everything here
returns values or emits progress events; nothing prints.
"""

from __future__ import annotations

import datetime as dt
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

import sqlalchemy.orm as so

from db import repository as repo
from db.migrate import ensure_schema
from db.models import utcnow
from db.retry import retry_db
from db.session import DatabaseError
from db.session import check_reachable
from db.session import make_engine
from db.session import safe_url
from db.session import session_factory
from tuner.control.jobs import CreatedJob
from tuner.control.jobs import create_job
from tuner.core.settings import Settings
from tuner.core.types import JobSpec
from tuner.kernels import KernelSpec
from tuner.views.progress import JobProgress
from tuner.views.progress import OnEvent
from tuner.views.progress import Waiting
from tuner.views.progress import ignore

FINISHED = ("completed", "failed", "cancelled")


def open_sessions(settings: Settings) -> so.sessionmaker[so.Session]:
    """Sessions on the service database, created or migrated to the newest schema."""
    check_reachable(settings.db_url)
    engine = make_engine(settings.db_url)
    ensure_schema(engine)
    return session_factory(engine)


def submit_job(spec: JobSpec, kernel: KernelSpec, settings: Settings) -> CreatedJob:
    """Create the job for the schedulers to pick up (idempotent under its key)."""
    return create_job(open_sessions(settings), settings.db_url, spec, kernel)


@dataclass(frozen=True)
class Cancelled:
    """The outcome of a cancel: ``already`` (the job had ended: its status) or the number of
    queued trials that will not run."""

    already: str | None
    queued: int


def cancel_job(settings: Settings, job_id: int) -> Cancelled:
    """Cancel a job: queued trials never run; running ones on live fleet workers finish and
    are kept; running ones no live worker holds (a killed ``tuner tune``) are cancelled."""
    with open_sessions(settings).begin() as session:
        job = repo.get_job(session, job_id)
        if job is None:
            raise DatabaseError(f"no job {job_id} in {safe_url(settings.db_url)}")
        if job.status in ("completed", "failed"):
            return Cancelled(job.status, 0)
        live_since = utcnow() - dt.timedelta(seconds=3 * settings.heartbeat_s)
        return Cancelled(None, repo.cancel_job(session, job_id, live_since=live_since))


#: Seconds between ``watch_job``'s checks that a live worker serves the job's device kind.
WORKER_CHECK_S = 5.0


def live_workers(settings: Settings, device_kind: str) -> int:
    """How many workers serving ``device_kind`` sent a heartbeat within three intervals."""
    return sum(1 for w in fleet_workers(settings)
               if w.device_kind == device_kind and w.state == "alive")


def watch_job(settings: Settings, job_id: int, on_event: OnEvent = ignore,
              poll_s: float = 0.5) -> str:
    """Report a job's progress until it ends; returns its final status."""
    sessions = open_sessions(settings)
    with sessions() as session:
        job = repo.get_job(session, job_id)
        if job is None:
            raise DatabaseError(f"no job {job_id} in {safe_url(settings.db_url)}")
        trials = JobSpec.from_json(job.spec).budget.trials
        kind = job.device_kind
    progress = JobProgress(sessions, job_id, trials)
    waiting: bool | None = None
    checked = 0.0
    while True:
        for event in progress.poll():
            on_event(event)
        with sessions() as session:
            job = repo.get_job(session, job_id)
            assert job is not None
            done = job.status in FINISHED and all(
                p.status == "done" for p in repo.problems_of(session, job_id))
            status = job.status
        if done:
            return status
        if time.monotonic() - checked >= WORKER_CHECK_S:  # say why nothing moves
            checked = time.monotonic()
            now_waiting = live_workers(settings, kind) == 0
            if now_waiting != (waiting or False):
                on_event(Waiting(kind, now_waiting))
            waiting = now_waiting
        time.sleep(poll_s)


@dataclass(frozen=True)
class WorkerView:
    """A worker of the fleet as the database knows it; ``state`` is ``silent`` when its
    heartbeat is three intervals old (its trials are being requeued)."""

    name: str
    device: str
    device_name: str
    device_kind: str
    queues: list[str]
    state: str
    heartbeat_age_s: float
    trials_done: int
    bandwidth_gbps: float


def fleet_workers(settings: Settings) -> list[WorkerView]:
    """Every worker that registered, by device kind and name (reads only: a missing database
    is ``DatabaseError``, never created)."""
    from tuner.views.jobs import read_rows

    now = utcnow()
    views = []
    for w in read_rows(settings, lambda session: list(repo.list_workers(session))):
        age = (now - w.last_heartbeat).total_seconds()
        state = w.status
        if state == "alive" and age >= 3 * settings.heartbeat_s:
            state = "silent"
        views.append(WorkerView(w.name, w.device, w.device_name, w.device_kind,
                                list(w.queues), state, age, w.trials_done,
                                float(w.ceilings.get("bandwidth_gbps", 0))))
    return views


def stop_on_signals(stop: threading.Event) -> None:
    """Set ``stop`` on SIGTERM and SIGINT (a clean shutdown of a long-running process)."""
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def run_scheduler(settings: Settings, poll_s: float,
                  on_start: Callable[[str], None] = lambda line: None) -> None:
    """Drive every submitted job until SIGTERM/SIGINT (blocking); ``on_start`` gets one line
    saying who schedules what, once connected."""
    from tuner.control.scheduler import Scheduler
    from workers.celery_app import configure
    from workers.dispatch import CeleryQueue

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    engine = make_engine(settings.db_url)
    retry_db(lambda: ensure_schema(engine), what="checking the schema", deadline_s=600)
    queue = CeleryQueue(configure(settings), settings.broker_url)
    scheduler = Scheduler(session_factory(engine), settings, queue, poll_s=poll_s)
    on_start(f"{scheduler.name}: scheduling jobs from {safe_url(settings.db_url)} via "
             f"{safe_url(settings.broker_url)}")
    stop = threading.Event()
    stop_on_signals(stop)
    scheduler.run(stop)


def compile_procs_for(device: str, option: int | None) -> int:
    """A worker's compile processes: the option, else (on a GPU) the host's cores per GPU
    less one, at most 8 (``tuner.measure.pipeline.default_compile_procs``); 0 on the CPU."""
    if device == "cpu":
        return 0
    if option is not None:
        return option
    from tuner.core.devices.nvidia_smi import local_gpu_names
    from tuner.measure.pipeline import default_compile_procs

    return default_compile_procs(gpus=max(1, len(local_gpu_names())))


def run_worker(settings: Settings, device: str, name: str | None, queue: str | None,
               compile_procs: int = 0) -> int:
    """Probe the device, register and consume the device kind's queue (blocking); with
    ``compile_procs`` > 0 the worker compiles ahead (``tuner.measure.pipeline``). Returns the exit
    status: non-zero when the worker failed or stopped without being asked to."""
    from workers.service import run_worker as serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    return serve(settings, device, name, queue, compile_procs=compile_procs)
