"""The ``tuner`` command line: one module per command group, each a thin layer that parses,
calls the app (``tuner.app``) or a library function, and renders.

Settings are read here, once, and passed down (``tuner.cli.common.settings_for``). Errors:
see ``tuner.cli.common``.
"""

from __future__ import annotations

import sys

import typer

from tuner.cli import advisor
from tuner.cli import database
from tuner.cli import fleet
from tuner.cli import production
from tuner.cli import tuning
from tuner.cli import views

app = typer.Typer(
    name="tuner", no_args_is_help=True, add_completion=False,
    help="Tune Triton kernels against their roofline; store every trial; serve the best config.",
)
for group in (tuning, fleet, views, production, advisor, database):
    group.register(app)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


__all__ = ["app", "main"]
