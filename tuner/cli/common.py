"""What every command shares: the consoles, the ``--db`` option, the settings, and the one
rule for errors.

User mistakes (unknown kernel, malformed shape, bad dtype, unreachable database…) print one
``error:`` line and exit with status 2, having written nothing. Exit status 1 means the service
itself failed (e.g. a GPU backend that cannot start).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Annotated
from typing import Any
from typing import TypeVar

import typer
from rich.console import Console

from tuner.core.parsing import UsageError
from tuner.core.settings import Settings

#: Output piped to a file or another program is not cut at 80 columns (a terminal's own width
#: still applies; ``COLUMNS`` overrides both).
PIPED_WIDTH = 200


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(stderr=stderr, width=PIPED_WIDTH if piped else None)


console = _console(stderr=False)
err = _console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

#: The same names on every command that takes the concept.
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
DeviceKindFilter = Annotated[str | None, typer.Option(
    "--device-kind", "--gpu", help="Only this device kind, e.g. h100-sxm.", show_default=False)]
KernelFilter = Annotated[str | None, typer.Option(
    "--kernel", "-k", help="Only this kernel (a name or path/to/module.py:NAME).",
    show_default=False)]
DbOption = Annotated[str | None, typer.Option(
    "--db", help="Database URL without a password (default: $TUNER_DB_URL, the file named by "
    "$TUNER_DB_URL_FILE, or the SQLite file in the data dir). A URL with a password goes in "
    "one of those: every user of the host can read a command line.")]


def _user_errors() -> tuple[type[BaseException], ...]:
    from db.session import DatabaseError
    from tuner.control.jobs import JobError
    from tuner.kernels import KernelError

    errors: tuple[type[BaseException], ...] = (UsageError, KernelError, DatabaseError, JobError)
    try:
        from workers.celery_app import InsecureBrokerError
    except ImportError:  # no Celery installed (a bare GPU box): no broker to refuse either
        return errors
    return (*errors, InsecureBrokerError)


def _one_line(exc: BaseException) -> None:
    """``error: …`` on one line, however wide (never wrapped), its text taken literally."""
    from rich.markup import escape

    err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)


def friendly(fn: F) -> F:
    """Turn user-facing errors into one line and exit status 2 (1 for service failures)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from tuner.measure.bench_process import BenchStartError

        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if isinstance(exc, _user_errors()):
                _one_line(exc)
                raise typer.Exit(2) from None
            if isinstance(exc, BenchStartError):
                _one_line(exc)
                raise typer.Exit(1) from None
            raise

    return wrapper  # type: ignore[return-value]


def bench_settings(db: str | None, bench_memory_gb: float | None) -> Settings:
    """``settings_for(db)`` with ``--bench-memory`` applied (``UsageError`` when invalid)."""
    try:
        return settings_for(db).with_bench_memory(bench_memory_gb)
    except ValueError as exc:
        raise UsageError(f"--bench-memory: {exc}") from None


def settings_for(db: str | None) -> Settings:
    """The settings of this process (environment), pointed at ``--db`` when given."""
    try:
        settings = Settings.from_env().with_db(db)
    except ValueError as exc:
        raise UsageError(f"bad setting in the environment: {exc}") from None
    from db.session import DatabaseError
    from db.session import normalise_url

    try:
        from sqlalchemy.engine import make_url

        make_url(normalise_url(settings.db_url))
    except Exception:
        where = "--db" if db else "TUNER_DB_URL"
        shown = settings.db_url.rsplit("@", 1)[-1]  # never a password
        raise DatabaseError(f"malformed database URL in {where}: {shown!r} (expected "
                            "sqlite:///path.db or postgresql://user:pass@host/db)") from None
    if db is not None and make_url(normalise_url(db)).password:
        raise UsageError("--db carries a password, which every user of this host can read on "
                         "the command line (ps): set TUNER_DB_URL, or TUNER_DB_URL_FILE to a "
                         "file holding the URL, instead")
    return settings
