"""Where the default search's local steps start, and the configs one step away from there.

A local step (``tuner.search.model_search``) scores the unmeasured valid configs that differ
from a few measured *tops* in one parameter (``moves``). The tops are the best configs, or the
best config of each *basin* (``basins``: configs ``apart`` or more parameters from every better
one picked), or — once a search has stalled — an *alternative* (``alternative``): the best
measured config whose value of one parameter differs from the best config's, the parameter
taken in turn. A needle optimum often sits beside configs that are poor on average in one
parameter's other value (``use_shmem=0`` on a convolution whose ``use_shmem=0`` configs have a
median of 1 % of the optimum, its needle among them); refining from the best config of that
value is a hill climb the model alone, which has learnt that value is bad, does not start.

All functions take candidate indices (positions in the search's list of valid configs).
"""

from __future__ import annotations

import itertools
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


def untried(rows: np.ndarray, measured: Sequence[int], base: int,
            near: np.ndarray) -> np.ndarray:
    """The configs of ``near`` (moves from candidate ``base``) that no ``measured`` config
    other than ``base`` is within one parameter of; ``rows``: every candidate's value indices
    (``tuner.search.design.index_matrix``). A hill climb from an alternative tries these first:
    the model, which learnt the other parameters from the rest of the space, would keep the
    climb among the values that are good there (a needle's block size never measured beside
    ``use_shmem=0``)."""
    others = [i for i in measured if i != base]
    if not len(near) or not others:
        return near
    moved, seen = np.nan_to_num(rows[near], nan=-1.0), np.nan_to_num(rows[others], nan=-1.0)
    apart = (moved[:, None, :] != seen[None, :, :]).sum(axis=2)
    out: np.ndarray = near[apart.min(axis=1) > 1]
    return out


def elsewhere(rows: np.ndarray, best: int, pool: np.ndarray, turn: int) -> np.ndarray:
    """The members of ``pool`` whose value of the ``turn``-th parameter (cyclically, among
    the parameters with more than one value in ``rows``, every candidate's value indices)
    differs from candidate ``best``'s; empty if none does."""
    varied = [j for j in range(rows.shape[1])
              if len(np.unique(np.nan_to_num(rows[:, j], nan=-1.0))) > 1]
    if not varied or not len(pool):
        return pool[:0]
    column = varied[turn % len(varied)]
    values = np.nan_to_num(rows[:, column], nan=-1.0)
    out: np.ndarray = pool[values[pool] != values[best]]
    return out
