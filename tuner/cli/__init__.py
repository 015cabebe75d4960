"""The ``tuner`` command line: one module per command group, each a thin layer that parses,
calls the app (``tuner.app``) or a library function, and renders.

Settings are read here, once, and passed down (``tuner.cli.common.settings_for``). Errors:
see ``tuner.cli.common``.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

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


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """The ``tuner`` entry point. The process is made non-dumpable first (it may hold
    credentials and it starts children that run user code: ``tuner.core.sandbox``), and
    SIGTERM is a Ctrl-C: ``tuner tune`` cancels its job and stops its bench processes."""
    from tuner.core.sandbox import protect_process

    protect_process()
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


__all__ = ["app", "main"]
