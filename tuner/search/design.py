"""Initial designs: which valid config the default search measures before its model leads.

``InitialDesign.pick`` chooses among the free valid configs (``pool``, candidate indices) given
those already taken, by ``init``:

* ``alternate`` (the default): every other point uniformly at random among the valid configs
  (typical configs), the rest greedy maximin in feature space (the corners, where kernel optima
  often sit: the largest tiles, a flag on or off);
* ``maximin``: all maximin after a random first; ``random``: all random;
* ``lhs``: a Latin hypercube over each parameter's *value indices* (every parameter's range
  covered evenly, whatever the constraints make of the valid set), each target snapped to the
  nearest free config by the L1 distance between index vectors scaled to [0, 1] (an inactive
  parameter plays no part). Measured in ``benchmarks/cold_start.py``; not the default.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence

import numpy as np

from search_spaces import Config
from search_spaces import SearchSpace

INITS = ("alternate", "maximin", "random", "lhs")


def index_matrix(space: SearchSpace, configs: Sequence[Config]) -> np.ndarray:
    """Each config's value index per parameter, scaled to [0, 1]; NaN where inactive.

    Shape (len(configs), len(space.params)); a parameter with one value scores 0.5.
    """
    out = np.full((len(configs), len(space.params)), np.nan)
    for j, p in enumerate(space.params):
        values = list(p.values())
        where = {repr(v): i for i, v in enumerate(values)}
        scale = max(len(values) - 1, 1)
        for i, c in enumerate(configs):
            if p.name in c and repr(c[p.name]) in where:
                out[i, j] = where[repr(c[p.name])] / scale if len(values) > 1 else 0.5
    return out


def latin_targets(n: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` points in [0, 1]^dims, one in each of the n strata of every dimension."""
    strata = np.stack([rng.permutation(n) for _ in range(dims)], axis=1)
    return (strata + rng.random((n, dims))) / n


class InitialDesign:
    """The start of one search (module docstring); ``n`` points in all."""

    def __init__(self, init: str, n: int, rng: np.random.Generator) -> None:
        if init not in INITS:
            raise ValueError(f"init must be one of {', '.join(INITS)}, not {init!r}")
        self.init, self.n, self.rng = init, n, rng
        self._targets: np.ndarray | None = None
        self._indices = np.zeros((0, 0))

    def pick(self, pool: np.ndarray, taken: Sequence[int], features: np.ndarray,
             index_rows: Callable[[], np.ndarray], spread_only: bool = False) -> int:
        """A member of ``pool``. ``features``: every candidate's model features;
        ``index_rows()``: every candidate's ``index_matrix`` row (built once, for ``lhs``);
        ``spread_only``: the pool is a prior's favourites (``lhs`` then acts as ``alternate``)."""
        if self.init == "lhs" and not spread_only:
            if self._targets is None:
                self._indices = index_rows()
                self._targets = latin_targets(self.n, self._indices.shape[1], self.rng)
            diff = np.abs(self._indices[pool] - self._targets[min(len(taken), self.n - 1)])
            return self._any(pool, np.where(np.isnan(diff), 0.0, diff).sum(axis=1), min)
        if self.init == "random" or not taken or (
                self.init in ("alternate", "lhs") and len(taken) % 2 == 0):
            return int(pool[int(self.rng.integers(len(pool)))])
        dist = np.full(len(pool), np.inf)
        for i in taken:
            dist = np.minimum(dist, ((features[pool] - features[i]) ** 2).sum(1))
        return self._any(pool, dist, max)

    def _any(self, pool: np.ndarray, score: np.ndarray, best: Callable[..., float]) -> int:
        """One of the members of ``pool`` whose score is ``best`` (min or max), at random."""
        ties = np.flatnonzero(score == best(score))
        return int(pool[ties[int(self.rng.integers(len(ties)))]])
