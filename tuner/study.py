"""The Optuna side of a problem: the only module that imports Optuna.

Two halves, so that the database is never on a proposal's critical path:

* **Proposing** runs on an in-memory Optuna study (``OptunaProposer``): ask and tell cost well
  under a millisecond instead of a dozen database round trips. It is rebuilt from the service's
  own trial table whenever a driver (re)starts, so nothing lives only in memory.
* **Recording** (``tuner.mirror``) copies every told trial into the problem's Optuna study in
  the service database: one study per (job, problem), named readably, objective "roofline
  fraction" (maximise), metrics in user attrs, failures as FAIL trials with their status. That
  is what ``optuna-dashboard <db url>`` shows.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.distributions import CategoricalDistribution
from optuna.distributions import IntDistribution
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from db.session import engine_kwargs
from db.session import normalise_url
from search_spaces import Config
from search_spaces import IntRange
from search_spaces import SearchSpace

SAMPLERS = ("tpe", "random", "grid")
OBJECTIVE_NAME = "roofline_fraction"

optuna.logging.set_verbosity(optuna.logging.WARNING)


class AskTellGridSampler(optuna.samplers.GridSampler):
    """``GridSampler`` for ask/tell: it calls ``study.stop()`` once the grid is exhausted, which
    raises outside ``Study.optimize``. The driver detects exhaustion itself (every valid config
    measured), so this sampler only stops proposing new points."""

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial,
                    state: TrialState, values: Sequence[float] | None) -> None:
        return None


@functools.lru_cache(maxsize=8)
def storage_for(db_url: str) -> RDBStorage:
    """One ``RDBStorage`` (one engine) per database URL per process."""
    return RDBStorage(normalise_url(db_url), engine_kwargs=engine_kwargs(db_url))


def make_sampler(name: str, space: SearchSpace, seed: int | None) -> optuna.samplers.BaseSampler:
    """``tpe`` (Optuna's defaults), ``random`` or ``grid`` (every point of the space)."""
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        if any(p.when for p in space.params):
            raise ValueError("the grid sampler cannot walk a space with conditional parameters")
        grid = {p.name: list(p.values()) for p in space.params}
        return AskTellGridSampler(grid, seed=seed)
    raise ValueError(f"unknown sampler {name!r} (choose from {', '.join(SAMPLERS)})")


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


@dataclass(frozen=True)
class Asked:
    number: int
    config: Config


@dataclass(frozen=True)
class Told:
    """A past trial, as the proposer needs it to rebuild: config, and outcome once final."""

    number: int
    config: Config
    final: bool
    fraction: float | None


class OptunaProposer:
    """Ask/tell on an in-memory Optuna study with the chosen sampler."""

    def __init__(self, space: SearchSpace, sampler: str, seed: int | None) -> None:
        self.space = space
        self.study = optuna.create_study(direction="maximize",
                                         sampler=make_sampler(sampler, space, seed))

    def rebuild(self, history: Sequence[Told]) -> None:
        """Replay the problem's trials (in number order) so numbering and sampling resume."""
        for t in history:
            if self.space.domain_errors(t.config):
                t = Told(t.number, {}, True, None)  # a config of an older space: a failure
            complete = t.final and t.fraction is not None and math.isfinite(t.fraction)
            state = TrialState.COMPLETE if complete else (
                TrialState.FAIL if t.final else TrialState.RUNNING)
            self.study.add_trial(optuna.trial.create_trial(
                state=state, params=dict(t.config),
                distributions=distributions(self.space, t.config),
                value=t.fraction if complete else None))

    def ask(self) -> Asked:
        trial = self.study.ask()
        return Asked(number=trial.number, config=self.space.suggest(trial))

    def tell(self, number: int, fraction: float | None) -> None:
        """Complete with ``fraction``, or FAIL when it is ``None`` or not finite."""
        if fraction is not None and math.isfinite(fraction):
            self.study.tell(number, fraction, skip_if_finished=True)
        else:
            self.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
