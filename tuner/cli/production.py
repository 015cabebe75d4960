"""Into production: ``best`` (the config to use), ``export`` (a self-contained file),
``report`` (what happened in a job) and ``revalidate`` (do the stored winners still hold)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tuner.cli.common import DbOption
from tuner.cli.common import console
from tuner.cli.common import err
from tuner.cli.common import friendly
from tuner.cli.common import settings_for
from tuner.core.parsing import UsageError
from tuner.core.parsing import parse_shape
from tuner.core.settings import Settings


def _dims_of(kernel: str, settings: Settings) -> list[str]:
    """Dimension order of a built-in or file kernel; any order for other names."""
    from tuner.kernels import KernelError
    from tuner.kernels import resolve_kernel

    try:
        return list(resolve_kernel(kernel, "interpret", settings.kernel_roots,
                                   isolated=True).dims)
    except KernelError:
        return []


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
    from tuner.app.views import export_best

    n = export_best(settings_for(db), out, kernel, device_kind, python)
    console.print(f"wrote {n} best config(s) to {out}" + (f" and {python}" if python else ""))


@friendly
def report(
    job: Annotated[int, typer.Argument(help="Job id.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into.")] =
    Path("report"),
    profile: Annotated[Path | None, typer.Option(
        help="A profile (tuner profile --out x.json) whose roofline chart to include.")]
    = None,
    db: DbOption = None,
) -> None:
    """Write an HTML report of a job (roofline of every trial, best configs, failures by
    status, search history) with its PNG charts."""
    from db.session import session_factory
    from tuner.app.views import open_engine
    from tuner.report import build_report

    settings = settings_for(db)
    engine = open_engine(settings)
    try:
        if profile is not None and not profile.is_file():
            raise UsageError(f"no such profile: {profile}")
        path = build_report(session_factory(engine), job, out, profile)
    except LookupError as exc:
        raise UsageError(str(exc)) from None
    finally:
        engine.dispose()
    console.print(f"wrote {path} (and roofline.png, history.png beside it)")


@friendly
def revalidate(
    kernel: Annotated[str | None, typer.Option(help="Only this kernel.")] = None,
    device_kind: Annotated[str | None, typer.Option(help="Only this device kind.")] = None,
    threshold: Annotated[float, typer.Option(
        help="Smallest relative change reported (noise floor; 3·cv if larger).")] = 0.05,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    db: DbOption = None,
) -> None:
    """Re-measure stored best configs on this machine (e.g. after a Triton or driver
    upgrade) and report regressions beyond noise; exit status 1 if any regressed."""
    from tuner.app.revalidate import revalidate as run

    results = run(settings_for(db), kernel, device_kind, threshold)
    if as_json:
        console.out(json.dumps([r.to_json() for r in results], indent=1))
    else:
        table = Table("kernel", "problem", "dtype", "device", "stored ms", "now ms",
                      "change", "noise", "verdict", title="revalidation")
        for r in results:
            table.add_row(r.kernel, r.problem_key, r.dtype, r.device_kind,
                          f"{r.stored_ms:.4g}", "–" if r.new_ms is None else
                          f"{r.new_ms:.4g}", "–" if r.change is None else
                          f"{r.change:+.1%}", "–" if r.noise is None else
                          f"±{r.noise:.0%}", r.verdict)
        console.print(table)
        if not results:
            console.print("no stored best configs match")
    if any(r.verdict == "regressed" for r in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    for command in (best, export, report, revalidate):
        app.command()(command)
