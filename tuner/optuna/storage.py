"""The Optuna storage of the service database, and each problem's study record in it."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from typing import Any

import optuna
import sqlalchemy as sa
from optuna.distributions import BaseDistribution
from optuna.distributions import CategoricalDistribution
from optuna.distributions import IntDistribution
from optuna.storages import RDBStorage

from db.migrate import create_racing
from db.migrate import schema_lock
from db.session import engine_kwargs
from db.session import make_engine
from db.session import normalise_url
from search_spaces import IntRange
from search_spaces import SearchSpace

OBJECTIVE_NAME = "roofline_fraction"

optuna.logging.set_verbosity(optuna.logging.WARNING)


@functools.lru_cache(maxsize=8)
def storage_for(db_url: str) -> RDBStorage:
    """One ``RDBStorage`` (one engine) per database URL per process. Optuna creates its
    tables on first use; that happens under the schema lock, and a process that loses the
    race to another one creating them uses theirs (``db.migrate.create_racing``)."""
    def create() -> RDBStorage:
        return RDBStorage(normalise_url(db_url), engine_kwargs=engine_kwargs(db_url))

    engine = make_engine(db_url)
    try:
        with schema_lock(engine):
            made = create_racing(create, lambda: _has_optuna_tables(engine))
    finally:
        engine.dispose()
    return made if made is not None else create()


def _has_optuna_tables(engine: sa.Engine) -> bool:
    return {"studies", "version_info", "alembic_version"} <= set(sa.inspect(engine)
                                                                 .get_table_names())


def distributions(space: SearchSpace, config: Mapping[str, Any]) -> dict[str, BaseDistribution]:
    """The Optuna distribution of each active parameter, exactly as ``space.suggest`` asks."""
    out: dict[str, BaseDistribution] = {}
    for p in space.active_params(config):
        if isinstance(p, IntRange):
            out[p.name] = IntDistribution(p.low, p.high, step=p.step)
        else:
            out[p.name] = CategoricalDistribution(list(p.values()))
    return out


def create_study_record(db_url: str, study_name: str, attrs: Mapping[str, Any]) -> None:
    """Create the problem's Optuna study in the database (idempotent), named and described."""
    study = optuna.create_study(storage=storage_for(db_url), study_name=study_name,
                                direction="maximize", load_if_exists=True)
    with warnings.catch_warnings():  # experimental API; naming the objective is all we need
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([OBJECTIVE_NAME])
    for key, value in attrs.items():
        study.set_user_attr(key, value)
