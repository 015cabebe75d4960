"""A local job: validate, start local bench processes, create the job, drive it to the end.

The embedded default (no Redis): an inline queue of ``spec.parallel`` worker threads, each with
its own isolated bench process (on a GPU with ``spec.lookahead`` > 0: ``1 + lookahead`` threads
per device, which share it and a pool of ``lookahead - 1`` compile processes,
``tuner.measure.pipeline``),
a driver stepping the job, and a mirror thread recording told
trials in their Optuna studies. Progress goes to ``on_event`` (``tuner.views.progress``).

Order matters for "bad input writes nothing": every check that can fail on user input runs
before the database is created or touched.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

from db import repository as repo
from db.migrate import ensure_schema
from db.session import check_reachable
from db.session import make_engine
from db.session import session_factory
from tuner.control.driver import JobDriver
from tuner.control.jobs import JobError
from tuner.control.jobs import create_job
from tuner.control.jobs import validate
from tuner.control.queue import InlineQueue
from tuner.control.trial_worker import TrialWorker
from tuner.control.trial_worker import worker_name
from tuner.core.devices.datasheets import CPU_KIND
from tuner.core.devices.datasheets import DEVICES
from tuner.core.devices.datasheets import normalise_device_name
from tuner.core.isolation import remove_tenant
from tuner.core.settings import Settings
from tuner.core.target import as_target
from tuner.core.types import JobSpec
from tuner.kernels import KernelSpec
from tuner.measure.backends.base import Backend
from tuner.measure.backends.base import Builder
from tuner.measure.backends.pool import BackendPool
from tuner.measure.backends.registry import make_backend
from tuner.measure.bench_process import BenchStartError
from tuner.measure.gpus import bench_backends
from tuner.measure.pipeline import CompilePool
from tuner.measure.pipeline import Pipeline
from tuner.measure.pipeline import PipelinedBackend
from tuner.measure.pipeline import worker_backends
from tuner.measure.pipeline import worker_builders
from tuner.optuna.mirror import Mirror
from tuner.optuna.mirror import MirrorThread
from tuner.views.progress import Interrupted
from tuner.views.progress import JobProgress
from tuner.views.progress import OnEvent
from tuner.views.progress import WorkersStarting
from tuner.views.progress import ignore

log = logging.getLogger(__name__)

#: Seconds between progress polls of the database while a job runs.
PROGRESS_EVERY_S = 0.25


@dataclass(frozen=True)
class TuneOutcome:
    job_id: int
    db_url: str
    interrupted: bool


def start_backends(backend: str, n: int, settings: Settings,
                   tenant: str | None = None) -> list[Backend]:
    """``n`` started backends of one kind, one GPU each on ``cuda`` (``tuner.measure.gpus``;
    ``UsageError`` when they would share one), all closed again if one fails to start;
    ``tenant``: the local run their processes serve (``tuner.measure.bench_process``)."""
    backends: list[Backend] = []
    names = bench_backends(backend, n, settings.gpus)
    try:
        for name in names:
            b = make_backend(name, cache_dir=settings.cache_dir,
                             kernel_roots=settings.kernel_roots,
                             memory_bytes=settings.bench_memory_bytes, tenant=tenant)
            b.start()
            backends.append(b)
    except BaseException:
        for b in backends:
            b.close()
        raise
    return backends


def detect_device_kind(backend: str, backends: list[Backend]) -> str:
    """The device kind the started backends run on (``cpu`` for the interpreter)."""
    if as_target(backend).is_interpreter:
        return CPU_KIND
    kind = backends[0].describe().get("device_kind")
    if not kind:
        name = backends[0].describe().get("device_name", "unknown")
        kind = normalise_device_name(str(name))
    return str(kind)


def on_this_machine(spec: JobSpec, backends: list[Backend]) -> JobSpec:
    """``spec`` with what only the started backends know filled in: the device kind, the
    static check's target when it was left to the local GPU (``auto``), and no lookahead
    where configs cannot be compiled ahead (``can_pipeline``)."""
    kind = spec.device_kind or detect_device_kind(spec.backend, backends)
    check = spec.static_check
    if check == "auto":
        check = kind if kind in DEVICES else None
    spec = dataclasses.replace(spec, device_kind=kind, static_check=check)
    return spec if can_pipeline(spec) else dataclasses.replace(spec, lookahead=0)


def run_local_job(spec: JobSpec, kernel: KernelSpec, settings: Settings,
                  on_event: OnEvent = ignore) -> TuneOutcome:
    """Tune on this machine until the job ends (blocking). A ``KeyboardInterrupt`` cancels
    the job, keeps every finished trial and returns with ``interrupted`` set."""
    pre_errors = validate(spec, kernel) if spec.device_kind else []
    if pre_errors:
        raise JobError("; ".join(pre_errors))
    check_reachable(settings.db_url)
    bench_backends(spec.backend, spec.parallel, settings.gpus)  # refused before anything starts
    on_event(WorkersStarting(spec.parallel, spec.backend))
    tenant = f"run-{os.getpid()}-{secrets.token_hex(4)}"  # this run's processes, no other's
    backends = start_backends(spec.backend, spec.parallel, settings, tenant)
    devices = backends
    try:
        spec = on_this_machine(spec, backends)
        devices = pipelined(spec, backends, settings, tenant)
        if devices is backends:
            spec = dataclasses.replace(spec, lookahead=0)
        engine = make_engine(settings.db_url)
        ensure_schema(engine)
        sessions = session_factory(engine)
        created = create_job(sessions, settings.db_url, spec, kernel)
    except BaseException:
        for b in devices:
            b.close()
        raise
    runs = Pipeline.from_lookahead(spec.lookahead).threads
    pools = iter([(i, BackendPool(spec.backend, settings, *devices_for(spec, b)))
                  for i, b in enumerate(devices) for _ in range(runs)])

    def local_worker() -> TrialWorker:
        i, pool = next(pools)
        return TrialWorker(pool.backend_for, sessions, worker_name(f":inline{i}"),
                           close=pool.close, lease_runs=runs, builder_for=pool.builder_for)

    queue = InlineQueue(local_worker, len(devices) * runs)
    mirror = Mirror(sessions, settings.db_url, settings.artifact_dir)
    mirroring = MirrorThread(mirror, lambda: {created.job_id: kernel.space}).start()
    interrupted = False
    progress = JobProgress(sessions, created.job_id, spec.budget.trials)
    try:
        driver = JobDriver(sessions, settings.db_url, created.job_id, kernel, queue, mirror)
        _drive(driver, progress, on_event)
    except KeyboardInterrupt:
        interrupted = True
        with sessions.begin() as session:
            repo.cancel_job(session, created.job_id, include_running=True)
        on_event(Interrupted(created.job_id))
    finally:
        queue.close()
        mirroring.stop()
        remove_tenant(settings.cache_dir, tenant)  # the run's cache and scratch: nobody's now
        if interrupted:  # tell what finished, close the problems, record it all
            JobDriver(sessions, settings.db_url, created.job_id, kernel, _NullQueue(),
                      mirror).step()
        engine.dispose()
    return TuneOutcome(created.job_id, settings.db_url, interrupted)


def can_pipeline(spec: JobSpec) -> bool:
    """Configs are compiled ahead for GPU backends (and the simulated ``standin:``) whose
    device kind has a datasheet entry (the compile target)."""
    return spec.lookahead > 0 and spec.target.on_gpu and spec.device_kind in DEVICES


def pipelined(spec: JobSpec, backends: list[Backend], settings: Settings,
              tenant: str | None = None) -> list[Backend]:
    """``backends`` each wrapped with a started pool of ``spec.lookahead - 1`` compile
    processes (at least one; ``tuner.measure.pipeline``), or ``backends`` itself when the job does
    not pipeline or its compile processes cannot start (a warning; the device compiles). The
    extra trial in flight keeps a compiled config waiting for the device."""
    if not can_pipeline(spec):
        return backends
    pools: list[CompilePool] = []
    try:
        for _ in backends:
            pools.append(CompilePool(spec.device_kind,
                                     Pipeline.from_lookahead(spec.lookahead).compile_procs,
                                     cache_dir=settings.cache_dir,
                                     kernel_roots=settings.kernel_roots,
                                     memory_bytes=settings.bench_memory_bytes,
                                     tenant=tenant))
            pools[-1].start()
    except BenchStartError as exc:  # the job still runs, compiling on the device
        for pool in pools:
            pool.close()
        log.warning("cannot compile ahead (%s); compiling on the device instead",
                    str(exc).splitlines()[0][:300])
        return backends
    except BaseException:
        for pool in pools:
            pool.close()
        raise
    return [PipelinedBackend(b, pool) for b, pool in zip(backends, pools, strict=True)]


def devices_for(spec: JobSpec,
                backend: Backend) -> tuple[dict[str, Backend], dict[str, Builder]]:
    """The backends and builders of one local worker thread (``worker_backends`` and
    ``worker_builders`` of ``tuner.measure.pipeline`` when it compiles ahead)."""
    if isinstance(backend, PipelinedBackend):
        return worker_backends(spec.backend, backend), worker_builders(backend)
    return {spec.backend: backend}, {}


def _drive(driver: JobDriver, progress: JobProgress, on_event: OnEvent) -> None:
    """Step the driver until the job ends, reporting progress at most every
    ``PROGRESS_EVERY_S`` seconds (and once at the end)."""
    last = 0.0
    while True:
        active = driver.step()
        now = time.monotonic()
        if now - last > PROGRESS_EVERY_S or not active:
            last = now
            for event in progress.poll():
                on_event(event)
        if not active:
            return
        driver.queue.wait(0.5)


class _NullQueue:
    """A queue that delivers nothing: the final step of an interrupted job only tells and
    records what already finished."""

    def submit(self, request: Any) -> None:
        return None

    def wait(self, timeout_s: float) -> None:
        return None

    def epoch(self) -> str | None:
        return None

    def close(self) -> None:
        return None
