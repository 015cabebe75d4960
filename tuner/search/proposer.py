"""The search's own interface: what a proposer is asked, told and rebuilt from.

Every search strategy is a *proposer*: ``ask() -> Asked | None`` (``None``: nothing left to
propose), ``tell(number, fraction | None)`` (``None``: the config failed) and
``rebuild(history)`` (replay a problem's trials, in number order, so numbering and sampling
resume after a restart). Fractions are roofline fractions (higher is better).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from search_spaces import Config
from search_spaces import Context
from search_spaces import SearchSpace


@dataclass(frozen=True)
class Asked:
    """One proposal: the trial number it gets and the config to measure."""

    number: int
    config: Config


@dataclass(frozen=True)
class Told:
    """A past trial, as a proposer needs it to rebuild: config, and outcome once final."""

    number: int
    config: Config
    final: bool
    fraction: float | None


class Proposer(Protocol):
    def rebuild(self, history: list[Told]) -> None: ...

    def ask(self) -> Asked | None: ...

    def tell(self, number: int, fraction: float | None) -> None: ...


class SearchFactory(Protocol):
    """Builds a proposer for one problem. ``prior(config)``: a predicted log roofline fraction
    (searches that can use it start from the configs it rates best); ``warm_start``: configs to
    measure first when valid here (searches that cannot use them ignore them)."""

    def __call__(self, space: SearchSpace, ctx: Context, seed: int | None,
                 prior: Callable[[Config], float] | None,
                 warm_start: Sequence[Config]) -> Proposer: ...
