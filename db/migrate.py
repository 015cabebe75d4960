"""Schema migrations of the service's tables, run programmatically (``tuner db upgrade``).

``upgrade(url)`` brings the ``tuner_*`` tables to the newest revision and is idempotent;
``current(url)`` reports the revision a database is at.

Any number of processes may start together on an empty database: schema changes run under
``schema_lock`` (a PostgreSQL advisory lock; SQLite serialises writers itself), and a process
that loses a race re-reads the revision instead of failing (``IntegrityError`` on creating
what another process just created means "someone else did it").
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from db.session import make_engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "tuner_alembic_version"
#: Key of the PostgreSQL advisory lock held while any process creates or migrates tables.
SCHEMA_LOCK_KEY = 0x7475_6E65_72  # "tuner"
T = TypeVar("T")


@contextlib.contextmanager
def schema_lock(engine: sa.Engine) -> Iterator[None]:
    """Hold the database's schema lock (PostgreSQL: a session advisory lock on a connection of
    its own; SQLite: nothing, its writers are serialised by the file lock)."""
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": SCHEMA_LOCK_KEY})
        conn.commit()
        try:
            yield
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": SCHEMA_LOCK_KEY})
            conn.commit()


def create_racing(fn: Callable[[], T], done: Callable[[], bool], tries: int = 5) -> T | None:
    """Run the schema-creating ``fn``; when it fails because another process created the same
    objects first (or holds the SQLite file), and ``done()`` then says the schema is there,
    return ``None`` instead of failing. Other errors are raised."""
    for attempt in range(tries):
        try:
            return fn()
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError, sa.exc.OperationalError):
            if done():
                return None
            if attempt == tries - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    return None


def alembic_config(connection: sa.Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head() -> str:
    """The newest revision shipped with this code."""
    rev = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert rev is not None
    return rev


def current(engine: sa.Engine) -> str | None:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        return ctx.get_current_revision()


def upgrade_engine(engine: sa.Engine, revision: str = "head") -> None:
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), revision)


def upgrade(url: str, revision: str = "head") -> str:
    """Upgrade the database at ``url``; returns the revision it is at afterwards."""
    engine = make_engine(url)
    try:
        if revision == "head":
            ensure_schema(engine)
        else:
            with schema_lock(engine):
                upgrade_engine(engine, revision)
        rev = current(engine)
        assert rev is not None
        return rev
    finally:
        engine.dispose()


def ensure_schema(engine: sa.Engine) -> None:
    """Upgrade to head if the database is behind (cheap when it is current); safe to call from
    many processes at once."""
    if current(engine) == head():
        return
    with schema_lock(engine):
        if current(engine) != head():
            create_racing(lambda: upgrade_engine(engine), lambda: current(engine) == head())
