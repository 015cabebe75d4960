"""Where the default search's local steps start, and the configs one step away from there.

A local step (``tuner.search.model_search``) scores the unmeasured valid configs that differ
from a few measured *tops* (``tops``) in one parameter (``moves``). The tops are the best
configs, or the best config of each *basin* (``basins``: configs ``apart`` or more parameters
from every better one picked), or — once a search has stalled — an *alternative*
(``alternative``): the best measured config whose value of one parameter differs from the
best config's, the parameter taken in turn. A needle optimum often sits beside configs that
are poor on average in one parameter's other value (``use_shmem=0`` on a convolution whose
``use_shmem=0`` configs have a median of 1 % of the optimum, its needle among them); refining
from the best config of that value is a hill climb the model alone, which has learnt that
value is bad, does not start.
The default search goes there by its global steps instead (``elsewhere``): once stalled,
each one is the model's pick among the configs whose value of one parameter, in turn, differs
from the best config's; and its stalled local steps, once the best config's neighbours are
measured, keep up a hill climb from an alternative (``Climb``), several steps from one start,
which the alternatives taken one step each never were.

All functions take candidate indices (positions in the search's list of valid configs).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence

import numpy as np

from search_spaces import Config
from search_spaces import SearchSpace
from search_spaces import canonical_json


def moves(space: SearchSpace, candidates: Sequence[Config], index: Mapping[str, int],
          idx: int, free: set[int], depth: int) -> np.ndarray:
    """Unmeasured (``free``) valid configs that differ from candidate ``idx`` in exactly
    ``depth`` parameters (any other values of them); ``index`` maps a config's canonical JSON
    to its candidate index."""
    base = candidates[idx]
    out = []
    for group in itertools.combinations(space.active_params(base), depth):
        others = [[v for v in p.values() if v != base[p.name]] for p in group]
        for values in itertools.product(*others):
            moved = {**base, **{p.name: v for p, v in zip(group, values, strict=True)}}
            j = index.get(canonical_json(moved))
            if j is not None and j in free:
                out.append(j)
    return np.array(out, dtype=int)


def basins(candidates: Sequence[Config], order: Sequence[int], apart: int) -> list[int]:
    """The best measured config, then, best first (``order``), every measured config that
    differs from each one already picked in at least ``apart`` parameters (one per basin)."""
    picked: list[int] = []
    for i in order:
        config = candidates[i]
        if all(sum(config.get(k) != v for k, v in candidates[j].items()) >= apart
               for j in picked):
            picked.append(i)
    return picked


def tops(candidates: Sequence[Config], order: Sequence[int], rule: str, count: int,
         stalled: bool, apart: int) -> list[int]:
    """The measured configs (``order``: best first) a local step starts from, by ``rule``:
    ``"never"`` the ``count`` best; ``"always"`` (or ``"stalled"`` once ``stalled``) the best of
    each of the ``count`` best basins (``basins``); ``"mixed"`` the ``count - 1`` best and the
    best config of the best other basin."""
    if rule == "always" or (rule == "stalled" and stalled):
        return basins(candidates, order, apart)[:count]
    if rule == "mixed":
        return list(order[:count - 1]) + basins(candidates, order, apart)[1:2]
    return list(order[:count])


def alternative(space: SearchSpace, candidates: Sequence[Config], order: Sequence[int],
                turn: int) -> int | None:
    """The best measured config (``order``: measured candidates, best first) whose value of
    the ``turn``-th parameter (cyclically, among the best config's active parameters with more
    than one value) differs from the best config's; if none does, the next parameter's;
    ``None`` if every measured config agrees with the best on all of them."""
    best = candidates[order[0]]
    names = [p.name for p in space.active_params(best) if len(list(p.values())) > 1]
    for k in range(len(names)):
        name = names[(turn + k) % len(names)]
        found = next((i for i in order if candidates[i].get(name) != best[name]), None)
        if found is not None:
            return found
    return None


def varied_columns(rows: np.ndarray) -> list[int]:
    """The columns of ``rows`` (every candidate's value indices, ``tuner.search.design.
    index_matrix``) that take more than one value (an inactive parameter's NaN is one)."""
    filled = np.nan_to_num(rows, nan=-1.0)
    return [j for j in range(filled.shape[1]) if len(np.unique(filled[:, j])) > 1]


def elsewhere(rows: np.ndarray, varied: Sequence[int], best: int, pool: np.ndarray,
              turn: int) -> np.ndarray:
    """The members of ``pool`` whose value of the ``turn``-th parameter (cyclically, among the
    ``varied`` columns of ``rows``) differs from candidate ``best``'s; empty if none does."""
    if not varied or not len(pool):
        return pool[:0]
    values = np.nan_to_num(rows[:, varied[turn % len(varied)]], nan=-1.0)
    out: np.ndarray = pool[values[pool] != values[best]]
    return out


class Climb:
    """A hill climb a stalled search keeps up across its local steps (``alternatives="climb"``).

    Its *head* starts at an ``alternative`` (the best measured config of another value of one
    parameter, the parameters in turn) and moves to each climb step's config that measures
    better than the head; after ``patience`` climb steps in a row that do not, or when the
    head has no unmeasured neighbour left, the climb starts again from the next parameter's
    alternative. One step at a time from a new start is how a needle's region is reached from
    a config the model thinks poor: the alternatives taken one step each (``"local"``) never
    get two steps in a row from the same start."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.head: int | None = None
        self.last: int | None = None  # the climb's last proposal
        self.misses = 0
        self.turn = 0

    def start(self, space: SearchSpace, candidates: Sequence[Config],
              observed: Mapping[int, float | None], order: Sequence[int],
              neighbours: Callable[[int], np.ndarray]) -> np.ndarray:
        """The configs the next climb step chooses among: the head's unmeasured neighbours
        (``neighbours(head)``), after taking in the last step's result (``observed``: candidate
        -> log fraction or ``None``; ``order``: measured candidates, best first)."""
        if self.head is not None and self.last is not None and self.last in observed:
            value, here = observed[self.last], observed.get(self.head)
            if value is not None and (here is None or value > here):
                self.head, self.misses = self.last, 0
            else:
                self.misses += 1
            self.last = None
        if self.head is not None and self.misses < self.patience:
            near = neighbours(self.head)
            if len(near):
                return near
        names = len(space.active_params(candidates[order[0]]))
        for _ in range(max(1, names)):
            self.head = alternative(space, candidates, order, self.turn)
            self.turn += 1
            self.misses = 0
            if self.head is None:
                break
            near = neighbours(self.head)
            if len(near):
                return near
        self.head = None
        return np.zeros(0, dtype=int)
