"""Fleet commands: submit, watch, cancel, workers, and the scheduler and worker processes."""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType

import sqlalchemy.orm as so
from rich.console import Console
from rich.progress import BarColumn
from rich.progress import MofNCompleteColumn
from rich.progress import Progress
from rich.progress import TaskID
from rich.progress import TextColumn
from rich.progress import TimeElapsedColumn
from rich.table import Table

from db import repository as repo
from db.migrate import ensure_schema
from db.models import utcnow
from db.retry import retry_db
from db.session import DatabaseError
from db.session import check_reachable
from db.session import make_engine
from db.session import safe_url
from db.session import session_factory
from tuner.cli_tune import update_progress
from tuner.control.jobs import create_job
from tuner.core.settings import Settings
from tuner.core.types import JobSpec
from tuner.kernels import KernelSpec

FINISHED = ("completed", "failed", "cancelled")


def _sessions(settings: Settings) -> so.sessionmaker[so.Session]:
    check_reachable(settings.db_url)
    engine = make_engine(settings.db_url)
    ensure_schema(engine)
    return session_factory(engine)


def submit_job(spec: JobSpec, kernel: KernelSpec, settings: Settings, console: Console) -> int:
    """Create the job for the schedulers to pick up; prints and returns its id at once."""
    created = create_job(_sessions(settings), settings.db_url, spec, kernel)
    note = " (already submitted with this idempotency key)" if created.existing else ""
    console.print(f"job {created.job_id}{note}: {len(created.study_names)} problem(s) "
                  f"for the {spec.device_kind} queue; follow it with: tuner watch "
                  f"{created.job_id}", highlight=False)
    return created.job_id


def cancel(settings: Settings, job_id: int, console: Console) -> None:
    sessions = _sessions(settings)
    with sessions.begin() as session:
        job = repo.get_job(session, job_id)
        if job is None:
            raise DatabaseError(f"no job {job_id} in {safe_url(settings.db_url)}")
        if job.status in ("completed", "failed"):
            console.print(f"job {job_id} already {job.status}")
            return
        n = repo.cancel_job(session, job_id)
    console.print(f"job {job_id} cancelled: {n} queued trial(s) will not run; running ones "
                  "finish and are kept")


def watch(settings: Settings, job_id: int, err: Console, poll_s: float = 0.5) -> str:
    """Live progress of a job until it ends; returns its final status."""
    sessions = _sessions(settings)
    with sessions() as session:
        job = repo.get_job(session, job_id)
        if job is None:
            raise DatabaseError(f"no job {job_id} in {safe_url(settings.db_url)}")
        trials = JobSpec.from_json(job.spec).budget.trials
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("best {task.fields[best]}"), TimeElapsedColumn())
    tasks: dict[int, TaskID] = {}
    bests: dict[int, int | None] = {}
    with Progress(*columns, console=err) as progress:
        while True:
            update_progress(progress, tasks, bests, sessions, job_id, trials)
            with sessions() as session:
                job = repo.get_job(session, job_id)
                assert job is not None
                done = job.status in FINISHED and all(
                    p.status == "done" for p in repo.problems_of(session, job_id))
                status = job.status
            if done:
                return status
            time.sleep(poll_s)


def show_workers(settings: Settings, console: Console) -> None:
    sessions = _sessions(settings)
    table = Table("worker", "device", "kind", "queue", "status", "last heartbeat", "trials",
                  "bandwidth GB/s", header_style="bold")
    now = utcnow()
    with sessions() as session:
        for w in repo.list_workers(session):
            age = (now - w.last_heartbeat).total_seconds()
            state = w.status
            if state == "alive" and age >= 3 * settings.heartbeat_s:
                state = "silent"  # presumed dead: its trials are being requeued
            table.add_row(w.name, f"{w.device} {w.device_name}", w.device_kind,
                          ",".join(w.queues), state, f"{age:.0f} s ago",
                          str(w.trials_done), f"{w.ceilings.get('bandwidth_gbps', 0):.0f}")
    console.print(table)


def _stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def run_scheduler(settings: Settings, poll_s: float, err: Console) -> None:
    from tuner.control.scheduler import Scheduler
    from workers.celery_app import configure
    from workers.dispatch import CeleryQueue

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    engine = make_engine(settings.db_url)
    retry_db(lambda: ensure_schema(engine), what="checking the schema", deadline_s=600)
    queue = CeleryQueue(configure(settings), settings.broker_url)
    scheduler = Scheduler(session_factory(engine), settings, queue, poll_s=poll_s)
    err.print(f"{scheduler.name}: scheduling jobs from {safe_url(settings.db_url)} via "
              f"{safe_url(settings.broker_url)}", highlight=False)
    stop = threading.Event()
    _stop_on_signals(stop)
    scheduler.run(stop)


def run_worker_process(settings: Settings, device: str, name: str | None, queue: str | None,
                       err: Console) -> None:
    from workers.service import run_worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    err.print(f"worker on {device}: probing the device…")
    run_worker(settings, device, name, queue)

