"""The ``tuner`` Typer application: every command group registered on one app."""

from __future__ import annotations

import typer
from typer.core import TyperOption

from tuner.cli import advisor
from tuner.cli import capture
from tuner.cli import database
from tuner.cli import fleet
from tuner.cli import production
from tuner.cli import read_only
from tuner.cli import tuning

_type_label = TyperOption.display_type_rich


def _flag_without_type(self: TyperOption, ctx: typer.Context) -> str | None:
    """A flag takes no value: Typer's help would show ``<bool>`` beside it, as if it did."""
    return None if self.is_flag else _type_label(self, ctx)


TyperOption.display_type_rich = _flag_without_type  # type: ignore[method-assign,assignment]

app = typer.Typer(
    name="tuner", no_args_is_help=True, add_completion=False,
    help="Tune Triton kernels against their roofline; store every trial; serve the best config.",
)
for group in (tuning, capture, fleet, read_only, production, advisor, database):
    group.register(app)


def version_text() -> str:
    """``tuner <version> (triton …, torch …, python …)`` from package metadata (no imports)."""
    import importlib.metadata
    import platform

    def of(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return (f"tuner {of('kernel-tuner-service')} (triton {of('triton')}, torch {of('torch')}, "
            f"optuna {of('optuna')}, python {platform.python_version()})")


def _show_version(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(
        False, "--version", help="Print the versions of tuner, Triton, torch and Optuna.",
        callback=_show_version, is_eager=True)) -> None:
    """Tune Triton kernels against their roofline; store every trial; serve the best config."""
