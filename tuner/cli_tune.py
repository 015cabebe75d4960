"""``tuner tune``: validate, start local workers, create the job, drive it with a progress bar.

Order matters for "bad input writes nothing": every check that can fail on user input runs
before the database is created or touched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy.orm as so
from rich.console import Console
from rich.progress import BarColumn
from rich.progress import MofNCompleteColumn
from rich.progress import Progress
from rich.progress import TaskID
from rich.progress import TextColumn
from rich.progress import TimeElapsedColumn

from db import repository as repo
from db.migrate import ensure_schema
from db.models import Trial
from db.session import check_reachable
from db.session import make_engine
from db.session import safe_url
from db.session import session_factory
from tuner.control.driver import JobDriver
from tuner.control.jobs import JobError
from tuner.control.jobs import create_job
from tuner.control.jobs import validate
from tuner.control.queue import InlineQueue
from tuner.core.devices import CPU_KIND
from tuner.core.devices import DEVICES
from tuner.core.devices import normalise_device_name
from tuner.core.settings import Settings
from tuner.core.types import JobSpec
from tuner.kernels import KernelSpec
from tuner.optuna.mirror import Mirror
from tuner.optuna.mirror import MirrorThread
from workers.backends.base import Backend
from workers.backends.base import make_backend
from workers.backends.pool import BackendPool
from workers.worker import TrialWorker
from workers.worker import worker_name


@dataclass(frozen=True)
class TuneOutcome:
    job_id: int
    db_url: str
    interrupted: bool


def format_config(config: dict[str, Any] | None) -> str:
    if not config:
        return "–"
    return " ".join(f"{k}={v}" for k, v in config.items())


def describe_score(t: Trial) -> str:
    """One line: the fraction, what it is a fraction of, and the throughput."""
    if t.score_basis == "recorded-best":
        return (f"{t.fraction:.4g} of the recorded optimum: {t.median_ms:.4g} ms vs "
                f"{t.roof_ms:.4g} ms")
    rates = "" if t.tflops is None else f", {t.tflops:.4g} TFLOP/s, {t.gbps:.4g} GB/s"
    if t.score_basis == "predicted":
        return (f"PREDICTED by the analytic model (not a measurement): {t.median_ms:.4g} ms, "
                f"{t.fraction:.4g} of the datasheet roofline ({t.bound}-bound){rates}")
    median = t.median_ms if t.confirm_ms is None else t.confirm_ms
    fraction = t.fraction if t.confirm_ms is None or not t.roof_ms else t.roof_ms / t.confirm_ms
    confirmed = "" if t.confirm_ms is None else " (re-timed interleaved)"
    return (f"roofline fraction {fraction:.4g} ({t.score_basis} roofline, {t.bound}-bound): "
            f"median {median:.4g} ms{confirmed} vs roof {t.roof_ms:.4g} ms{rates}")


def _start_backends(spec_backend: str, n: int, settings: Settings) -> list[Backend]:
    backends: list[Backend] = []
    try:
        for _ in range(n):
            backend = make_backend(spec_backend, cache_dir=settings.cache_dir,
                                   kernel_roots=settings.kernel_roots)
            backend.start()
            backends.append(backend)
    except BaseException:
        for b in backends:
            b.close()
        raise
    return backends


def detect_device_kind(backend: str, backends: list[Backend]) -> str:
    if backend == "interpret":
        return CPU_KIND
    kind = backends[0].describe().get("device_kind")
    if not kind:
        name = backends[0].describe().get("device_name", "unknown")
        kind = normalise_device_name(str(name))
    return str(kind)


def run_tune(spec: JobSpec, kernel: KernelSpec, settings: Settings, console: Console,
             err: Console) -> TuneOutcome:
    """Tune on the embedded default (inline queue, local bench processes); blocking."""
    pre_errors = validate(spec, kernel) if spec.device_kind else []
    if pre_errors:
        raise JobError("; ".join(pre_errors))
    check_reachable(settings.db_url)
    err.print(f"[dim]starting {spec.parallel} local worker(s) on backend {spec.backend}…[/]")
    backends = _start_backends(spec.backend, spec.parallel, settings)
    try:
        if not spec.device_kind:
            kind = detect_device_kind(spec.backend, backends)
            spec = JobSpec.from_json({**spec.to_json(), "device_kind": kind})
        if spec.static_check == "auto":  # now that the local GPU is known
            check = spec.device_kind if spec.device_kind in DEVICES else None
            spec = JobSpec.from_json({**spec.to_json(), "static_check": check})
        engine = make_engine(settings.db_url)
        ensure_schema(engine)
        sessions = session_factory(engine)
        created = create_job(sessions, settings.db_url, spec, kernel)
    except BaseException:
        for b in backends:
            b.close()
        raise
    pools = iter([BackendPool(spec.backend, settings, {spec.backend: b}) for b in backends])

    def local_worker() -> TrialWorker:
        pool = next(pools)
        return TrialWorker(pool.backend_for, sessions, worker_name(":inline"), close=pool.close)

    queue = InlineQueue(local_worker, len(backends))
    mirror = Mirror(sessions, settings.db_url, settings.artifact_dir)
    mirroring = MirrorThread(mirror, lambda: {created.job_id: kernel.space}).start()
    interrupted = False
    try:
        driver = JobDriver(sessions, settings.db_url, created.job_id, kernel, queue, mirror)
        _drive_with_progress(driver, sessions, created.job_id, spec, err)
    except KeyboardInterrupt:
        interrupted = True
        with sessions.begin() as session:
            repo.cancel_job(session, created.job_id, include_running=True)
        err.print(f"[yellow]interrupted: job {created.job_id} cancelled; every finished "
                  "trial is kept[/]")
    finally:
        queue.close()
        mirroring.stop()
        if interrupted:  # tell what finished, close the problems, record it all
            JobDriver(sessions, settings.db_url, created.job_id, kernel, _NullQueue(),
                      mirror).step()
        engine.dispose()
    return TuneOutcome(created.job_id, settings.db_url, interrupted)


class _NullQueue:
    def submit(self, request: Any) -> None:
        return None

    def wait(self, timeout_s: float) -> None:
        return None

    def close(self) -> None:
        return None


def _drive_with_progress(driver: JobDriver, sessions: so.sessionmaker[so.Session],
                         job_id: int, spec: JobSpec, err: Console) -> None:
    """Step the driver until the job ends; one bar per problem, a line per new best."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("best {task.fields[best]}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=False) as progress:
        tasks: dict[int, TaskID] = {}
        bests: dict[int, int | None] = {}
        last = 0.0
        while True:
            active = driver.step()
            now = time.monotonic()
            if now - last > 0.25 or not active:
                last = now
                update_progress(progress, tasks, bests, sessions, job_id,
                                spec.budget.trials)
            if not active:
                return
            driver.queue.wait(0.5)


def update_progress(progress: Progress, tasks: dict[int, TaskID],
                    bests: dict[int, int | None], sessions: so.sessionmaker[so.Session],
                    job_id: int, trials: int) -> None:
    """One bar per problem (measured of ``trials``, best fraction); a line per new best."""
    with sessions() as session:
        for p in repo.problems_of(session, job_id):
            best = f"{p.best_fraction:.4g}" if p.best_fraction is not None else "–"
            if p.id not in tasks:
                tasks[p.id] = progress.add_task(p.problem_key, total=trials, best=best)
            if p.best_trial_id is not None and bests.get(p.id) != p.best_trial_id:
                bests[p.id] = p.best_trial_id
                t = repo.get_trial(session, p.best_trial_id)
                if t is not None:
                    confirmed = t.confirm_ms is not None
                    label = "confirmed best" if confirmed else "new best"
                    ms = t.confirm_ms if confirmed else t.median_ms
                    progress.console.print(
                        f"[green]{label}[/] {p.problem_key} #{t.number}: {best} of the "
                        f"roofline, {ms:.4g} ms  [dim]{format_config(t.config)}[/]",
                        highlight=False)
            done = p.status == "done"
            progress.update(tasks[p.id], completed=trials if done else p.measured,
                            best=best, description=p.problem_key + (" ✓" if done else ""))


def print_summary(outcome: TuneOutcome, settings: Settings, console: Console) -> None:
    engine = make_engine(settings.db_url)
    with session_factory(engine)() as session:
        job = repo.get_job(session, outcome.job_id)
        assert job is not None
        counts = repo.status_counts(session, outcome.job_id)
        for p in repo.problems_of(session, outcome.job_id):
            console.print(f"[bold]{job.kernel} {p.problem_key} {job.dtype} on "
                          f"{job.device_kind}[/] (job {job.id}, {p.measured} measured; "
                          f"{p.stop_reason or p.status})", highlight=False)
            t = repo.get_trial(session, p.best_trial_id) if p.best_trial_id else None
            if t is None or t.fraction is None or t.median_ms is None:
                console.print("  no config passed its correctness check")
                continue
            console.print(f"  best config: {format_config(t.config)}", highlight=False)
            console.print(f"  {describe_score(t)}", highlight=False)
    engine.dispose()
    by_status = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    console.print(f"trials by status: {by_status}")
    console.print(f"database: {safe_url(settings.db_url)}")
    console.print(f"next: tuner status {outcome.job_id} · tuner dashboard · tuner best "
                  f"{job.kernel} --shape … --dtype {job.dtype}", highlight=False)
