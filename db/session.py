"""Engines and sessions. Nothing is created at import time.

SQLite files get WAL journalling and a 30 s busy timeout (several local worker threads write
results while the driver reads); PostgreSQL engines ping before use (trials can idle for
minutes between queries). ``check_reachable`` turns an unreachable or malformed URL into one
clear ``DatabaseError`` line before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
import sqlalchemy.orm as so
from sqlalchemy.engine import make_url

SQLITE_BUSY_TIMEOUT_S = 30.0


class DatabaseError(RuntimeError):
    """The database cannot be used; the message is meant for the user."""


def normalise_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` as psycopg 3 URLs."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def engine_kwargs(url: str) -> dict[str, Any]:
    """Keyword arguments for ``create_engine`` (also given to Optuna's ``RDBStorage``)."""
    u = make_url(normalise_url(url))
    if u.get_backend_name() == "sqlite":
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    return {"pool_pre_ping": True, "pool_size": 5, "max_overflow": 10}


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def sqlite_path(url: str) -> Path | None:
    u = make_url(normalise_url(url))
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database)


def make_engine(url: str, *, create_parent: bool = True,
                connect_timeout_s: int | None = None) -> sa.Engine:
    """An engine for ``url``; for SQLite the parent folder is created when asked.
    ``connect_timeout_s``: give up connecting to PostgreSQL after this many seconds."""
    try:
        u = make_url(normalise_url(url))
    except sa.exc.ArgumentError as exc:
        raise DatabaseError(f"malformed database URL {url!r}: {exc}") from None
    path = sqlite_path(url)
    if path is not None and create_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        kwargs = engine_kwargs(url)
        if connect_timeout_s is not None and u.get_backend_name() == "postgresql":
            kwargs["connect_args"] = {**kwargs.get("connect_args", {}),
                                      "connect_timeout": connect_timeout_s}
        engine = sa.create_engine(u, **kwargs)
    except (sa.exc.ArgumentError, ImportError, sa.exc.NoSuchModuleError) as exc:
        raise DatabaseError(f"unsupported database URL {url!r}: {exc}") from None
    if u.get_backend_name() == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def check_reachable(url: str) -> None:
    """Raise ``DatabaseError`` unless ``url`` can be connected to. Creates no SQLite file."""
    path = sqlite_path(url)
    if path is not None:
        if path.exists() and not path.is_file():
            raise DatabaseError(f"database path {path} is not a file")
        parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), None)
        if parent is None or not parent.is_dir():
            raise DatabaseError(f"cannot create the database under {path.parent}")
        return
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
        raise DatabaseError(f"cannot reach the database at {safe_url(url)}: {reason}") from None
    finally:
        engine.dispose()


def is_missing_tables(exc: BaseException) -> bool:
    """True when ``exc`` says the service's tables do not exist yet (SQLite or PostgreSQL):
    nothing was ever stored there."""
    text = str(exc)
    return "no such table" in text or "does not exist" in text


def safe_url(url: str) -> str:
    """``url`` with its password hidden, for messages and logs."""
    try:
        return make_url(normalise_url(url)).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<malformed URL>"


def session_factory(engine: sa.Engine) -> so.sessionmaker[so.Session]:
    return so.sessionmaker(engine, expire_on_commit=False)
