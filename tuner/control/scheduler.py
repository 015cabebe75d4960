"""``tuner scheduler``: drive every submitted job through the fleet's queue.

Each round, a scheduler leases the jobs it can (a compare-and-set on ``tuner_jobs``: a job is
driven by one scheduler at a time, however many run), steps each one's ``JobDriver``, and lets
the lease go when the job is finished. Every write of a driver renews its lease and is refused
once another scheduler has taken the job over (``LeaseLost``), so a scheduler that stalled past
its lease (a long step, a paused process) stops driving instead of writing beside the new
driver. A scheduler that dies simply stops renewing its leases;
another (or the same, restarted) takes the jobs over after ``scheduler_lease_s`` and resumes
them from the database. A scheduler that *re-takes* a job (its lease had lapsed, so another may
have driven it in between) drops its in-memory driver and rebuilds it from the database too.
Database outages are waited out, never fatal, and no job can end a scheduler: a kernel
description (a sandboxed subprocess, up to its timeout) runs in a thread beside the tick, so a
kernel whose import hangs holds back only its own job; a job whose Optuna studies are missing
(its submit was killed after committing it) has them created before it is driven; anything
else a job raises fails that job, with the error, and the others go on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import ThreadPoolExecutor

import sqlalchemy.orm as so

from db import repository as repo
from db.retry import is_transient
from tuner.control.driver import JobDriver
from tuner.control.driver import LeaseLost
from tuner.control.jobs import ensure_studies
from tuner.control.queue import BenchQueue
from tuner.core.settings import Settings
from tuner.core.types import JobSpec
from tuner.kernels import KernelError
from tuner.kernels import KernelSpec
from tuner.kernels import resolve_kernel
from tuner.optuna.mirror import Mirror
from tuner.optuna.mirror import MirrorThread

log = logging.getLogger(__name__)

#: Kernel descriptions that may run at once (each a sandboxed subprocess).
DESCRIBE_THREADS = 4


def scheduler_name() -> str:
    return f"scheduler.{os.getpid()}@{socket.gethostname()}"


class Scheduler:
    def __init__(self, sessions: so.sessionmaker[so.Session], settings: Settings,
                 queue: BenchQueue, name: str | None = None, poll_s: float = 0.5,
                 kernel_loader: Callable[[JobSpec], KernelSpec] | None = None,
                 load_wait_s: float = 1.0) -> None:
        """``load_wait_s``: how long a tick waits for a job's kernel description before it
        moves on to the other jobs (the description goes on in its thread)."""
        self.sessions = sessions
        self.settings = settings
        self.queue = queue
        self.name = name or scheduler_name()
        self.poll_s = poll_s
        self.drivers: dict[int, JobDriver] = {}
        self.load_wait_s = load_wait_s
        self._loading: dict[int, Future[KernelSpec]] = {}
        self._describers = ThreadPoolExecutor(DESCRIBE_THREADS, thread_name_prefix="describe")
        self.mirror = Mirror(sessions, settings.db_url, settings.artifact_dir)
        self._load = kernel_loader or (
            lambda spec: resolve_kernel(spec.kernel, spec.backend, settings.kernel_roots,
                                        isolated=True))

    def _prepare(self, job_id: int, spec: JobSpec) -> KernelSpec:
        """In a describe thread: the job's studies (created if missing) and its kernel."""
        created = ensure_studies(self.sessions, self.settings.db_url, job_id)
        if created:
            log.warning("job %s had %d missing Optuna studies (its submit was interrupted); "
                        "created them", job_id, created)
        return self._load(spec)

    def _driver(self, job_id: int) -> JobDriver | None:
        """The job's driver; None while its kernel is still being described (or when the
        job cannot be driven: it is then failed with the reason)."""
        driver = self.drivers.get(job_id)
        if driver is not None:
            return driver
        future = self._loading.get(job_id)
        if future is None:
            with self.sessions() as session:
                job = repo.get_job(session, job_id)
                assert job is not None
                spec = JobSpec.from_json(job.spec)
            future = self._describers.submit(self._prepare, job_id, spec)
            self._loading[job_id] = future
            with contextlib.suppress(TimeoutError):
                future.exception(timeout=self.load_wait_s)
        if not future.done():
            return None
        del self._loading[job_id]
        try:
            kernel = future.result()
        except KernelError as exc:
            log.error("job %s cannot be driven here: %s", job_id, exc)
            with self.sessions.begin() as session:
                repo.set_job_status(session, job_id, "failed", error=str(exc))
            return None
        driver = JobDriver(self.sessions, self.settings.db_url, job_id, kernel, self.queue,
                           self.mirror, heartbeat_s=self.settings.heartbeat_s,
                           republish_s=self.settings.republish_s,
                           lease=(self.name, self.settings.scheduler_lease_s))
        self.drivers[job_id] = driver
        log.info("%s drives job %s", self.name, job_id)
        return driver

    def _fail(self, job_id: int, exc: Exception) -> None:
        """A job that raised what no retry cures: failed with the error; the others go on."""
        log.exception("job %s failed in %s", job_id, self.name)
        self.drivers.pop(job_id, None)
        error = f"scheduler error: {type(exc).__name__}: {str(exc)[:500]}"
        with self.sessions.begin() as session:
            repo.set_job_status(session, job_id, "failed", error=error)
            repo.release_job(session, job_id, self.name)

    def tick(self) -> int:
        """One round over every drivable job; returns how many this scheduler drives."""
        with self.sessions() as session:
            job_ids = repo.drivable_job_ids(session)
        for job_id in list(self.drivers):
            if job_id not in job_ids:
                del self.drivers[job_id]
        for job_id in list(self._loading):
            if job_id not in job_ids:
                del self._loading[job_id]
        driven = 0
        for job_id in job_ids:
            with self.sessions.begin() as session:
                leased = repo.lease_job(session, job_id, self.name,
                                        self.settings.scheduler_lease_s)
            if leased != "renewed":  # not ours, or someone else may have driven it meanwhile
                self.drivers.pop(job_id, None)
            if leased is None:
                self._loading.pop(job_id, None)
                continue
            try:
                driver = self._driver(job_id)
                if driver is None:
                    continue
                active = driver.step()
            except LeaseLost as exc:
                log.warning("%s; %s stops driving it", exc, self.name)
                self.drivers.pop(job_id, None)
                continue
            except Exception as exc:
                if is_transient(exc):
                    raise
                self._fail(job_id, exc)
                continue
            if active:
                driven += 1
            else:
                log.info("job %s finished", job_id)
                del self.drivers[job_id]
                with self.sessions.begin() as session:
                    repo.release_job(session, job_id, self.name)
        return driven

    def run(self, stop: threading.Event | None = None) -> None:
        """Tick until ``stop`` is set; a database outage pauses, it never ends the loop."""
        stop = stop or threading.Event()
        mirroring = MirrorThread(self.mirror, lambda: {
            job_id: d.kernel.space for job_id, d in list(self.drivers.items())}).start()
        while not stop.is_set():
            try:
                driven = self.tick()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("database unavailable (%s); retrying",
                            str(exc).splitlines()[0][:200])
                self.drivers.clear()  # rebuilt from the database when it is back
                self._loading.clear()
                stop.wait(1.0)
                continue
            if driven:
                self.queue.wait(self.poll_s)
            else:
                stop.wait(self.poll_s)
        mirroring.stop()
        self._describers.shutdown(wait=False, cancel_futures=True)
        self.queue.close()

