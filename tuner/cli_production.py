"""``tuner report`` and ``tuner revalidate``: what happened in a job, and whether the stored
winners still hold."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from tuner.cli_args import UsageError


def register(app: typer.Typer, friendly: Callable[[Any], Any], console: Console,
             settings_for: Callable[[str | None], Any]) -> None:
    """Add ``report`` and ``revalidate`` to the CLI."""

    @app.command()
    @friendly
    def report(
        job: Annotated[int, typer.Argument(help="Job id.")],
        out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into.")] =
        Path("report"),
        profile: Annotated[Path | None, typer.Option(
            help="A profile (tuner profile --out x.json) whose roofline chart to include.")]
        = None,
        db: Annotated[str | None, typer.Option(help="Database URL.")] = None,
    ) -> None:
        """Write an HTML report of a job (roofline of every trial, best configs, failures by
        status, search history) with its PNG charts."""
        from db.session import session_factory
        from tuner.cli_views import open_engine
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

    @app.command()
    @friendly
    def revalidate(
        kernel: Annotated[str | None, typer.Option(help="Only this kernel.")] = None,
        device_kind: Annotated[str | None, typer.Option(help="Only this device kind.")] = None,
        threshold: Annotated[float, typer.Option(
            help="Smallest relative change reported (noise floor; 3·cv if larger).")] = 0.05,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
        db: Annotated[str | None, typer.Option(help="Database URL.")] = None,
    ) -> None:
        """Re-measure stored best configs on this machine (e.g. after a Triton or driver
        upgrade) and report regressions beyond noise; exit status 1 if any regressed."""
        from tuner.revalidate import revalidate as run

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
