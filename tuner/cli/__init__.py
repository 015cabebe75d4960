"""The ``tuner`` command line: one module per command group, each a thin layer that parses,
calls the app (``tuner.app``) or a library function, and renders (``tuner.cli.commands``
assembles them).

Settings are read here, once, and passed down (``tuner.cli.common.settings_for``). Errors:
see ``tuner.cli.common``. Importing this package is light: ``main`` protects the process
before the command modules are imported.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Any


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """The ``tuner`` entry point. The process is made non-dumpable first, before anything
    else is imported (it may hold credentials and it starts children that run user code:
    ``tuner.core.sandbox``), and SIGTERM is a Ctrl-C: ``tuner tune`` cancels its job and
    stops its bench processes."""
    from tuner.core.sandbox import protect_process

    protect_process()
    signal.signal(signal.SIGTERM, _interrupt)
    from tuner.cli.commands import app

    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


def __getattr__(name: str) -> Any:
    if name == "app":
        from tuner.cli.commands import app

        return app
    raise AttributeError(name)


__all__ = ["app", "main"]
