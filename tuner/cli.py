"""The ``tuner`` command line. Settings are read here, once, and passed down.

User mistakes (unknown kernel, malformed shape, bad dtype, unreachable database…) print one
``error:`` line and exit with status 2, having written nothing. Exit status 1 means the service
itself failed (e.g. a GPU backend that cannot start).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated
from typing import Any
from typing import TypeVar

import typer
from rich.console import Console

from db.session import DatabaseError
from tuner.cli_args import UsageError
from tuner.cli_args import parse_shape
from tuner.cli_spec import BackendOpt
from tuner.cli_spec import CompileTimeoutOpt
from tuner.cli_spec import ConfirmTopOpt
from tuner.cli_spec import DeviceKindOpt
from tuner.cli_spec import DtypeOpt
from tuner.cli_spec import JobOptions
from tuner.cli_spec import KernelArg
from tuner.cli_spec import KernelOpt
from tuner.cli_spec import MaxAttemptsOpt
from tuner.cli_spec import ParallelOpt
from tuner.cli_spec import PatienceOpt
from tuner.cli_spec import RepOpt
from tuner.cli_spec import RunTimeoutOpt
from tuner.cli_spec import SamplerOpt
from tuner.cli_spec import SeedOpt
from tuner.cli_spec import ShapeOpt
from tuner.cli_spec import StaticCheckOpt
from tuner.cli_spec import TargetOpt
from tuner.cli_spec import TimeLimitOpt
from tuner.cli_spec import TransferOpt
from tuner.cli_spec import TrialsOpt
from tuner.cli_spec import WarmupOpt
from tuner.cli_spec import build_spec
from tuner.cli_spec import pick_kernel
from tuner.core.settings import Settings
from tuner.core.types import DEFAULT_TRANSFER
from tuner.kernels import KernelError
from tuner.kernels import resolve_kernel

app = typer.Typer(
    name="tuner", no_args_is_help=True, add_completion=False,
    help="Tune Triton kernels against their roofline; store every trial; serve the best config.",
)
db_app = typer.Typer(help="Database schema commands.", no_args_is_help=True)
app.add_typer(db_app, name="db")

console = Console()
err = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

DbOption = Annotated[str | None, typer.Option(
    "--db", help="Database URL (default: $TUNER_DB_URL or the SQLite file in the data dir).")]


def _user_errors() -> tuple[type[BaseException], ...]:
    from tuner.control.jobs import JobError
    from workers.celery_app import InsecureBrokerError

    return (UsageError, KernelError, DatabaseError, JobError, InsecureBrokerError)


def friendly(fn: F) -> F:
    """Turn user-facing errors into one line and exit status 2 (1 for service failures)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from workers.bench_process import BenchStartError

        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if isinstance(exc, _user_errors()):
                err.print(f"[red]error:[/] {exc}", highlight=False)
                raise typer.Exit(2) from None
            if isinstance(exc, BenchStartError):
                err.print(f"[red]error:[/] {exc}", highlight=False)
                raise typer.Exit(1) from None
            raise

    return wrapper  # type: ignore[return-value]


def settings_for(db: str | None) -> Settings:
    return Settings.from_env().with_db(db)


@app.command()
@friendly
def tune(
    kernel: KernelArg = None, kernel_option: KernelOpt = None, shape: ShapeOpt = None,
    dtype: DtypeOpt = None,
    backend: BackendOpt = "auto", device_kind: DeviceKindOpt = None, trials: TrialsOpt = 30,
    time_limit: TimeLimitOpt = None, target: TargetOpt = None, patience: PatienceOpt = None,
    sampler: SamplerOpt = "auto", seed: SeedOpt = None, parallel: ParallelOpt = 1,
    compile_timeout: CompileTimeoutOpt = 120, run_timeout: RunTimeoutOpt = 60,
    warmup_ms: WarmupOpt = None, rep_ms: RepOpt = None, static_check: StaticCheckOpt = None,
    confirm_top: ConfirmTopOpt = 3, transfer: TransferOpt = DEFAULT_TRANSFER,
    db: DbOption = None,
) -> None:
    """Tune KERNEL on this machine (blocking, no Redis): --parallel local bench processes."""
    from tuner.cli_tune import print_summary
    from tuner.cli_tune import run_tune

    settings = settings_for(db)
    ref = pick_kernel(kernel, kernel_option)
    options = JobOptions(ref, shape or [], dtype, backend, device_kind, trials, time_limit,
                         target, patience, sampler, seed, parallel, compile_timeout,
                         run_timeout, warmup_ms, rep_ms, static_check=static_check,
                         confirm_top=confirm_top, transfer=transfer)
    spec, spec_kernel = build_spec(options, settings, submit=False)
    outcome = run_tune(spec, spec_kernel, settings, console, err)
    print_summary(outcome, settings, console)
    if outcome.interrupted:
        raise typer.Exit(130)


@app.command()
@friendly
def submit(
    kernel: KernelArg = None, kernel_option: KernelOpt = None, shape: ShapeOpt = None,
    dtype: DtypeOpt = None,
    backend: BackendOpt = "auto", device_kind: DeviceKindOpt = None, trials: TrialsOpt = 30,
    time_limit: TimeLimitOpt = None, target: TargetOpt = None, patience: PatienceOpt = None,
    sampler: SamplerOpt = "auto", seed: SeedOpt = None, parallel: ParallelOpt = 4,
    compile_timeout: CompileTimeoutOpt = 120, run_timeout: RunTimeoutOpt = 60,
    warmup_ms: WarmupOpt = None, rep_ms: RepOpt = None, max_attempts: MaxAttemptsOpt = 3,
    static_check: StaticCheckOpt = None, confirm_top: ConfirmTopOpt = 3,
    transfer: TransferOpt = DEFAULT_TRANSFER,
    idempotency_key: Annotated[str | None, typer.Option(
        help="Submitting again with the same key returns the same job.")] = None,
    db: DbOption = None,
) -> None:
    """Submit a job to the fleet and print its id at once (schedulers and workers run it)."""
    from tuner.cli_fleet import submit_job

    settings = settings_for(db)
    ref = pick_kernel(kernel, kernel_option)
    options = JobOptions(ref, shape or [], dtype, backend, device_kind, trials, time_limit,
                         target, patience, sampler, seed, parallel, compile_timeout,
                         run_timeout, warmup_ms, rep_ms, max_attempts, idempotency_key,
                         static_check, confirm_top, transfer)
    spec, spec_kernel = build_spec(options, settings, submit=True)
    submit_job(spec, spec_kernel, settings, console)


@app.command()
@friendly
def watch(job: Annotated[int, typer.Argument(help="Job id.")], db: DbOption = None) -> None:
    """Follow a job live until it ends."""
    from tuner.cli_fleet import watch as watch_job

    status = watch_job(settings_for(db), job, err)
    console.print(f"job {job} {status}")


@app.command()
@friendly
def cancel(job: Annotated[int, typer.Argument(help="Job id.")], db: DbOption = None) -> None:
    """Cancel a job: queued trials never run; running ones finish and are kept."""
    from tuner.cli_fleet import cancel as cancel_job

    cancel_job(settings_for(db), job, console)


@app.command()
@friendly
def workers(db: DbOption = None) -> None:
    """List the fleet's workers: device, queue, last heartbeat, trials done."""
    from tuner.cli_fleet import show_workers

    show_workers(settings_for(db), console)


@app.command()
@friendly
def scheduler(
    poll: Annotated[float, typer.Option(help="Seconds between rounds when idle.")] = 0.5,
    db: DbOption = None,
) -> None:
    """Drive every submitted job (several schedulers may run; each job has one driver)."""
    from tuner.cli_fleet import run_scheduler

    run_scheduler(settings_for(db), poll, err)


@app.command()
@friendly
def worker(
    device: Annotated[str, typer.Option(help="cuda:N (one worker per GPU) or cpu.")] = "cpu",
    name: Annotated[str | None, typer.Option(help="Node name (default device.pid@host).")] = None,
    queue: Annotated[str | None, typer.Option(
        help="Queue to consume (default bench.<gpu kind>, or cpu).")] = None,
    db: DbOption = None,
) -> None:
    """Run a Celery worker for one GPU (or the CPU queue); it owns an isolated bench process."""
    from tuner.cli_fleet import run_worker_process

    run_worker_process(settings_for(db), device, name, queue, err)


@app.command()
@friendly
def status(
    job: Annotated[int | None, typer.Argument(help="Job id (default: list recent jobs).")] = None,
    limit: Annotated[int, typer.Option(help="Jobs to list.")] = 20,
    db: DbOption = None,
) -> None:
    """Show recent jobs, or one job's problems and trial statuses."""
    from tuner.cli_views import show_job
    from tuner.cli_views import show_jobs

    settings = settings_for(db)
    if job is None:
        show_jobs(settings, limit, console)
    else:
        show_job(settings, job, console)


@app.command()
@friendly
def best(
    kernel: Annotated[str, typer.Argument(help="Kernel name.")],
    shape: Annotated[str, typer.Option("--shape", "-s", help="Problem, e.g. M=512,N=512,K=512.")],
    dtype: Annotated[str, typer.Option(help="Input dtype.")],
    device_kind: Annotated[str | None, typer.Option(help="Device kind (default: any).")] = None,
    source: Annotated[str | None, typer.Option(
        help="Exported JSON file or database URL (default: the service database).")] = None,
    db: DbOption = None,
) -> None:
    """Print the config to use for a kernel, problem and dtype as JSON; the tier that served
    it (exact, bucket, nearest, default) and any staleness go to stderr."""
    from tuner.lookup import best_config

    problem = parse_shape(shape, _dims_of(kernel, settings_for(db)))
    src = source or settings_for(db).db_url
    if "://" not in src and not Path(src).is_file():
        raise UsageError(f"no such export file: {src}")
    config = best_config(kernel, problem, dtype, device_kind, source=src)
    if config is None:
        err.print(f"no tuned config for {kernel} {shape} {dtype}"
                  + (f" on {device_kind}" if device_kind else ""))
        raise typer.Exit(1)
    tuned = ",".join(f"{k}={v}" for k, v in (config.problem or {}).items())
    err.print(f"tier {config.tier}" + (f" (tuned for {tuned} on {config.device_kind})"
                                       if config.problem else "")
              + (f"; stale: {', '.join(config.stale_reasons)}" if config.stale else ""),
              highlight=False)
    console.print_json(json.dumps(config))


def _dims_of(kernel: str, settings: Settings) -> list[str]:
    """Dimension order of a built-in or file kernel; any order for other names."""
    try:
        return list(resolve_kernel(kernel, "interpret", settings.kernel_roots).dims)
    except KernelError:
        return []


@app.command()
@friendly
def export(
    out: Annotated[Path, typer.Option("--out", "-o", help="JSON file to write.")] = Path(
        "best_configs.json"),
    kernel: Annotated[str | None, typer.Option(help="Only this kernel.")] = None,
    device_kind: Annotated[str | None, typer.Option(help="Only this device kind.")] = None,
    python: Annotated[Path | None, typer.Option(
        "--python", help="Also write them as a self-contained Python module.")] = None,
    db: DbOption = None,
) -> None:
    """Write the best configs to a self-contained JSON file (and a Python module) for
    production lookup."""
    from tuner.cli_views import export_best

    n = export_best(settings_for(db), out, kernel, device_kind, python)
    console.print(f"wrote {n} best config(s) to {out}" + (f" and {python}" if python else ""))


@app.command()
@friendly
def dashboard(
    host: Annotated[str, typer.Option(
        help="Bind address (keep it local: the dashboard has no auth).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8080,
    db: DbOption = None,
) -> None:
    """Serve optuna-dashboard on the service database (every job's studies)."""
    from tuner.cli_views import serve_dashboard

    serve_dashboard(settings_for(db), host, port, err)


@app.command()
@friendly
def kernels(
    db: DbOption = None,
) -> None:
    """List the kernels that can be tuned, with the parameters of each space."""
    from tuner.cli_views import show_kernels

    show_kernels(settings_for(db), console)


@db_app.command("upgrade")
@friendly
def db_upgrade(db: DbOption = None) -> None:
    """Create or migrate the service's tables to the newest revision."""
    from db.migrate import upgrade
    from db.session import check_reachable
    from db.session import safe_url

    settings = settings_for(db)
    check_reachable(settings.db_url)
    revision = upgrade(settings.db_url)
    console.print(f"{safe_url(settings.db_url)} is at revision {revision}")


def _register_more() -> None:
    from tuner import cli_advisor
    from tuner import cli_production

    cli_advisor.register(app, friendly, console, settings_for)
    cli_production.register(app, friendly, console, settings_for)


_register_more()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
