"""The Optuna side of a problem: the only module that imports Optuna.

One study per (job, problem), stored in the service's own database so ``optuna-dashboard <url>``
shows it. The objective is the roofline fraction (maximise). Failures are FAIL trials with the
status in user attrs; NaN is never told. Ask and tell go through trial *numbers*, so a restarted
driver can tell trials it did not ask.
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
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from db.session import engine_kwargs
from db.session import normalise_url
from search_spaces import Config
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


@dataclass(frozen=True)
class Asked:
    number: int
    optuna_trial_id: int
    config: Config


class ProblemStudy:
    """Ask/tell access to the study of one problem."""

    def __init__(self, db_url: str, study_name: str, space: SearchSpace, sampler: str,
                 seed: int | None) -> None:
        self.space = space
        self.storage = storage_for(db_url)
        self.study = optuna.create_study(
            storage=self.storage, study_name=study_name, direction="maximize",
            sampler=make_sampler(sampler, space, seed), load_if_exists=True)
        self.study_id = self.storage.get_study_id_from_name(study_name)

    def describe(self, attrs: Mapping[str, Any]) -> None:
        """Set readable study attributes and name the objective (shown by the dashboard)."""
        with warnings.catch_warnings():  # experimental API; naming the objective is all we need
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.study.set_metric_names([OBJECTIVE_NAME])
        for key, value in attrs.items():
            self.study.set_user_attr(key, value)

    def enqueue(self, config: Config) -> None:
        """Make ``config`` the next proposal (seeds, known-good configs)."""
        self.study.enqueue_trial(dict(config), skip_if_exists=True)

    def ask(self) -> Asked:
        trial = self.study.ask()
        config = self.space.suggest(trial)
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(self.study_id,
                                                                         trial.number)
        return Asked(number=trial.number, optuna_trial_id=trial_id, config=config)

    def tell(self, optuna_trial_id: int, number: int, fraction: float | None,
             user_attrs: Mapping[str, Any]) -> None:
        """Store user attrs, then complete with ``fraction`` or FAIL when it is ``None``.

        Idempotent: a trial already finished is left as it is (``skip_if_finished``).
        """
        frozen = self.storage.get_trial(optuna_trial_id)
        if frozen.state.is_finished():
            return
        for key, value in user_attrs.items():
            if value is not None:
                self.storage.set_trial_user_attr(optuna_trial_id, key, _jsonable(value))
        if fraction is not None and math.isfinite(fraction):
            self.study.tell(number, fraction, skip_if_finished=True)
        else:
            self.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)

    def fail_orphans(self, known_numbers: set[int]) -> int:
        """FAIL trials RUNNING in Optuna that the service never recorded: asked by a driver
        that died before writing its trial row. Returns how many were failed."""
        n = 0
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if t.number not in known_numbers:
                self.storage.set_trial_user_attr(t._trial_id, "status", "lost")
                self.study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
                n += 1
        return n


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
