"""Retry database work through short outages (a restarting PostgreSQL, a locked SQLite file).

Only connection-level failures are retried; constraint violations and programming errors are
raised at once. The function retried must be a whole transaction, safe to run again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

log = logging.getLogger(__name__)
T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """True for errors a retry can cure: lost or refused connections, a locked database."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError):
        return True
    text = str(exc).lower()
    return any(s in text for s in ("connection refused", "database is locked",
                                   "server closed the connection", "terminating connection"))


def retry_db(fn: Callable[[], T], *, deadline_s: float = 120.0, what: str = "database call",
             initial_s: float = 0.2, max_sleep_s: float = 5.0) -> T:
    """Run ``fn`` until it succeeds or ``deadline_s`` passes (then re-raise the last error)."""
    start = time.monotonic()
    sleep_s = initial_s
    while True:
        try:
            return fn()
        except Exception as exc:
            if not is_transient(exc) or time.monotonic() - start + sleep_s > deadline_s:
                raise
            log.warning("%s failed (%s); retrying in %.1f s", what,
                        str(exc).splitlines()[0][:200], sleep_s)
            time.sleep(sleep_s)
            sleep_s = min(max_sleep_s, sleep_s * 2)
