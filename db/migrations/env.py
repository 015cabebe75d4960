"""Alembic environment for the service's own tables (``tuner_*``).

Optuna keeps its tables and its own ``alembic_version`` table in the same database, so ours is
``tuner_alembic_version`` and autogenerate only looks at ``tuner_*`` tables.
"""

from __future__ import annotations

from typing import Any

from alembic import context

from db.models import Base

VERSION_TABLE = "tuner_alembic_version"


def _include_object(obj: Any, name: str | None, type_: str, reflected: bool,
                    compare_to: Any) -> bool:
    if type_ == "table":
        return bool(name and name.startswith("tuner_")) and name != VERSION_TABLE
    return True


def run_migrations_online() -> None:
    connection = context.config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        include_object=_include_object,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
