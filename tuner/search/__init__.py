"""Search strategies: which config to measure next.

Every strategy is a *proposer*: ``ask() -> Asked | None`` (``None``: nothing left to propose),
``tell(number, fraction | None)`` and ``rebuild(history)``. ``auto`` is the default
(``ModelSearch``); ``tpe``, ``random`` and ``grid`` are Optuna's samplers.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Protocol

from search_spaces import Config
from search_spaces import Context
from search_spaces import SearchSpace
from tuner.study import SAMPLERS as OPTUNA_SAMPLERS
from tuner.study import Asked
from tuner.study import OptunaProposer
from tuner.study import Told

SEARCHES = ("auto", *OPTUNA_SAMPLERS)


class Proposer(Protocol):
    def rebuild(self, history: list[Told]) -> None: ...

    def ask(self) -> Asked | None: ...

    def tell(self, number: int, fraction: float | None) -> None: ...


def make_proposer(name: str, space: SearchSpace, ctx: Context, seed: int | None,
                  prior: Callable[[Config], float] | None = None,
                  warm_start: Sequence[Config] = ()) -> Proposer:
    """The named search. ``prior(config)``: a predicted log roofline fraction (``auto`` starts
    from the configs it rates best and models only what it gets wrong). ``warm_start``: configs
    ``auto`` measures first, when valid here (see ``tuner.search.transfer``); the Optuna
    samplers ignore them."""
    if name == "auto":
        from tuner.search.model_search import ModelSearch

        return ModelSearch(space, ctx, seed, prior=prior, warm_start=warm_start)
    if name in OPTUNA_SAMPLERS:
        return OptunaProposer(space, name, seed)
    raise ValueError(f"unknown search {name!r} (choose from {', '.join(SEARCHES)})")
