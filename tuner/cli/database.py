"""``tuner db``: the service's schema."""

from __future__ import annotations

import typer

from tuner.cli.common import DbOption
from tuner.cli.common import console
from tuner.cli.common import friendly
from tuner.cli.common import settings_for

db_app = typer.Typer(help="Database schema commands.", no_args_is_help=True)


@db_app.command("upgrade")
@friendly
def db_upgrade(db: DbOption = None) -> None:
    """Create or migrate the service's tables (and Optuna's) to the newest revision."""
    from db.migrate import upgrade
    from db.session import check_reachable
    from db.session import safe_url
    from tuner.optuna.storage import storage_for

    settings = settings_for(db)
    check_reachable(settings.db_url)
    revision = upgrade(settings.db_url)
    storage_for(settings.db_url)  # Optuna creates its tables now, under the schema lock
    console.print(f"{safe_url(settings.db_url)} is at revision {revision}")


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
