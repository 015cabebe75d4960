"""Optuna's samplers as proposers of the search interface (``tuner.search.proposer``).

``OptunaProposer`` runs ask/tell on an in-memory Optuna study with the chosen sampler: ask and
tell cost well under a millisecond. It is rebuilt from the service's own trial table whenever a
driver (re)starts, so nothing lives only in memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Sequence

import optuna
from optuna.trial import TrialState

from search_spaces import Config
from search_spaces import Context
from search_spaces import SearchSpace
from tuner.optuna.storage import distributions
from tuner.search.proposer import Asked
from tuner.search.proposer import Told

SAMPLERS = ("tpe", "random", "grid", "gp")


class AskTellGridSampler(optuna.samplers.GridSampler):
    """``GridSampler`` for ask/tell: it calls ``study.stop()`` once the grid is exhausted, which
    raises outside ``Study.optimize``. The driver detects exhaustion itself (every valid config
    measured), so this sampler only stops proposing new points."""

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial,
                    state: TrialState, values: Sequence[float] | None) -> None:
        return None


def make_sampler(name: str, space: SearchSpace, seed: int | None) -> optuna.samplers.BaseSampler:
    """``tpe`` (Optuna's defaults), ``random``, ``grid`` (every point of the space) or ``gp``
    (Optuna's ``GPSampler``, a Gaussian process with its defaults; needs torch and scipy)."""
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if name == "grid":
        if any(p.when for p in space.params):
            raise ValueError("the grid sampler cannot walk a space with conditional parameters")
        grid = {p.name: list(p.values()) for p in space.params}
        return AskTellGridSampler(grid, seed=seed)
    raise ValueError(f"unknown sampler {name!r} (choose from {', '.join(SAMPLERS)})")


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

    def ask(self) -> Asked | None:
        """The next config; None once a grid has handed out every point (each one measured or
        in flight: asking again would only repeat one)."""
        sampler = self.study.sampler
        if isinstance(sampler, optuna.samplers.GridSampler) and sampler.is_exhausted(self.study):
            return None
        trial = self.study.ask()
        return Asked(number=trial.number, config=self.space.suggest(trial))

    def tell(self, number: int, fraction: float | None) -> None:
        """Complete with ``fraction``, or FAIL when it is ``None`` or not finite."""
        if fraction is not None and math.isfinite(fraction):
            self.study.tell(number, fraction, skip_if_finished=True)
        else:
            self.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)


def sampler_search(name: str) -> Callable[..., OptunaProposer]:
    """A search factory (``tuner.search.proposer.SearchFactory``) for Optuna's sampler
    ``name``; the prior and warm-start configs are the default search's, not Optuna's."""
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r} (choose from {', '.join(SAMPLERS)})")

    def factory(space: SearchSpace, ctx: Context, seed: int | None,
                prior: Callable[[Config], float] | None,
                warm_start: Sequence[Config]) -> OptunaProposer:
        return OptunaProposer(space, name, seed)

    return factory
