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
from tuner.cli_args import check_device_kind
from tuner.cli_args import parse_shape
from tuner.cli_args import resolve_backend
from tuner.devices import CPU_KIND
from tuner.kernels import BUILTIN
from tuner.kernels import KernelError
from tuner.kernels import resolve_kernel
from tuner.settings import Settings
from tuner.types import Budget
from tuner.types import JobSpec
from tuner.types import TimingSettings

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
    from tuner.jobs import JobError

    return (UsageError, KernelError, DatabaseError, JobError)


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
    kernel: Annotated[str, typer.Argument(
        help=f"Kernel to tune: {', '.join(BUILTIN)}, path/to/module.py:NAME, or 'replay' "
             "with --backend replay:<file>.")],
    shape: Annotated[list[str] | None, typer.Option(
        "--shape", "-s", help="Problem size, e.g. M=512,N=512,K=512 or 512x512x512. Repeat "
                              "for several problems.")] = None,
    dtype: Annotated[str | None, typer.Option(
        help="Input dtype (fp32, fp16, bf16…); default: the kernel's first.")] = None,
    backend: Annotated[str, typer.Option(
        help="auto (cuda if a GPU is visible, else interpret), interpret, cuda, cuda:N, "
             "replay:<kernel tuner cache file>.")] = "auto",
    device_kind: Annotated[str | None, typer.Option(
        help="Device kind for constraints and roofline (detected by default).")] = None,
    trials: Annotated[int, typer.Option(help="Measured configs per problem.")] = 30,
    time_limit: Annotated[float | None, typer.Option(
        help="Seconds per problem before stopping.")] = None,
    target: Annotated[float | None, typer.Option(
        help="Stop a problem once this roofline fraction is reached.")] = None,
    patience: Annotated[int | None, typer.Option(
        help="Stop after this many measured trials without a new best.")] = None,
    sampler: Annotated[str, typer.Option(help="tpe, random or grid.")] = "tpe",
    seed: Annotated[int | None, typer.Option(help="Sampler and input seed.")] = None,
    parallel: Annotated[int, typer.Option(
        help="Trials in flight at once (one local bench process each).")] = 1,
    compile_timeout: Annotated[float, typer.Option(
        help="Seconds for compile + first call.")] = 120,
    run_timeout: Annotated[float, typer.Option(help="Seconds for check + timing.")] = 60,
    warmup_ms: Annotated[float | None, typer.Option(help="Warm-up time budget per trial.")] = None,
    rep_ms: Annotated[float | None, typer.Option(help="Timing budget per trial.")] = None,
    db: DbOption = None,
) -> None:
    """Tune KERNEL on this machine (blocking) and store every trial."""
    from tuner.cli_tune import print_summary
    from tuner.cli_tune import run_tune

    settings = settings_for(db)
    resolved_backend = resolve_backend(backend)
    spec_kernel = resolve_kernel(kernel, resolved_backend, settings.kernel_roots)
    problems = [parse_shape(s, spec_kernel.dims) for s in shape or []]
    if not problems and resolved_backend.startswith("replay:"):
        problems = [dict(spec_kernel.example_problem)]
    if resolved_backend == "interpret":
        kind = check_device_kind(device_kind or CPU_KIND, resolved_backend)
    elif resolved_backend.startswith("replay:"):
        from tuner.devices import normalise_device_name
        from tuner.kernels.recorded import recording_of

        kind = device_kind or normalise_device_name(recording_of(resolved_backend).device_name)
    else:
        kind = check_device_kind(device_kind, resolved_backend) if device_kind else ""
    interp = resolved_backend == "interpret"
    default_timing = TimingSettings(warmup_ms=0.0, rep_ms=200.0, min_reps=3, max_reps=50) \
        if interp else TimingSettings()
    timing = TimingSettings(
        warmup_ms=default_timing.warmup_ms if warmup_ms is None else warmup_ms,
        rep_ms=default_timing.rep_ms if rep_ms is None else rep_ms,
        min_reps=default_timing.min_reps, max_reps=default_timing.max_reps)
    spec = JobSpec(
        kernel=kernel, problems=problems, dtype=dtype or spec_kernel.dtypes[0],
        backend=resolved_backend, device_kind=kind, sampler=sampler, seed=seed,
        budget=Budget(trials=trials, wall_s=time_limit, target_fraction=target,
                      patience=patience),
        parallel=parallel, timing=timing, compile_timeout_s=compile_timeout,
        run_timeout_s=run_timeout)
    outcome = run_tune(spec, spec_kernel, settings, console, err)
    print_summary(outcome, settings, console)
    if outcome.interrupted:
        raise typer.Exit(130)


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
    """Print the best stored config for a kernel, problem and dtype as JSON."""
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
    db: DbOption = None,
) -> None:
    """Write the best configs to a self-contained JSON file for production lookup."""
    from tuner.cli_views import export_best

    n = export_best(settings_for(db), out, kernel, device_kind)
    console.print(f"wrote {n} best config(s) to {out}")


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


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
