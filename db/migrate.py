"""Schema migrations of the service's tables, run programmatically (``tuner db upgrade``).

``upgrade(url)`` brings the ``tuner_*`` tables to the newest revision and is idempotent;
``current(url)`` reports the revision a database is at.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from db.session import make_engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "tuner_alembic_version"


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
        if current(engine) != head() or revision != "head":
            upgrade_engine(engine, revision)
        rev = current(engine)
        assert rev is not None
        return rev
    finally:
        engine.dispose()


def ensure_schema(engine: sa.Engine) -> None:
    """Upgrade to head if the database is behind (cheap when it is current)."""
    if current(engine) != head():
        upgrade_engine(engine)
