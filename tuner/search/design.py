"""Initial designs: which valid config the default search measures before its model leads.

``InitialDesign.pick`` chooses among the free valid configs (``pool``, candidate indices) given
those already taken. Most designs are a **cycle** of three kinds of pick, the k-th pick being
letter ``k mod len`` of the cycle:

* ``R`` — uniformly at random among the valid configs (typical configs);
* ``M`` — greedy maximin in feature space (the corners, where kernel optima often sit: the
  largest tiles, a flag on or off); the first pick of a search, with nothing to be far from,
  is random;
* ``S`` — **snapped**: a uniformly random point of the declared grid (one value index per
  parameter, whatever the constraints allow), moved to the nearest valid config by the L1
  distance between value indices, ties going to the largest indices. Where constraints admit
  many more small-tile combinations than large ones (a GEMM's divisibility rules: 47 % of its
  valid configs have the smallest thread block, 42 % no vectors), uniform draws among the
  *valid* configs mostly give small tiles; snapped draws give each value nearer its share of
  the grid, and an invalid corner lands on the largest valid config next to it. (Kernel
  Tuner's Latin-hypercube populations snap the same way, with ties to the first config of its
  list, which its solver orders largest first.)

``init`` names a design: ``alternate-snap`` (``RMSM``, the default: chosen in
``benchmarks/search_efficiency.py`` and ``benchmarks/cold_start.py`` on recordings other than
the one reported), ``alternate`` (``RM``, the default before), ``maximin`` (``M``),
``random`` (``R``), ``snap`` (``S``), any other ``cycle-<letters>`` (``cycle-RMS``), or ``lhs``:
a Latin hypercube over each parameter's *value indices* (every parameter's range covered
evenly), each target snapped to the nearest free config by the L1 distance between index
vectors scaled to [0, 1] (an inactive parameter plays no part; measured, not the default).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence

import numpy as np

from search_spaces import Config
from search_spaces import SearchSpace

#: Named designs and their cycles (module docstring); ``lhs`` is not a cycle.
CYCLES = {"alternate": "RM", "alternate-snap": "RMSM", "maximin": "M", "random": "R",
          "snap": "S"}
INITS = (*CYCLES, "lhs")


def cycle_of(init: str) -> str | None:
    """The cycle of letters a design name stands for; ``None`` for ``lhs``.

    Raises ``ValueError`` for a name that is neither a design nor ``cycle-`` followed by one
    or more of the letters R, M and S."""
    if init in CYCLES:
        return CYCLES[init]
    letters = init.removeprefix("cycle-")
    if init.startswith("cycle-") and letters and set(letters) <= set("RMS"):
        return letters
    if init == "lhs":
        return None
    raise ValueError(f"init must be one of {', '.join(INITS)} or cycle-<letters R, M, S>, "
                     f"not {init!r}")


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


def nearest_then_highest(rows: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Positions of the ``rows`` (value indices, NaN where inactive) nearest ``target`` in L1
    distance (an inactive parameter plays no part) and, among those, with the highest sum."""
    dist = np.nansum(np.abs(rows - target), axis=1)
    near = np.flatnonzero(dist == dist.min())
    height = np.nansum(rows[near], axis=1)
    return np.asarray(near[height == height.max()])


def latin_targets(n: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` points in [0, 1]^dims, one in each of the n strata of every dimension."""
    strata = np.stack([rng.permutation(n) for _ in range(dims)], axis=1)
    return (strata + rng.random((n, dims))) / n


class InitialDesign:
    """The start of one search (module docstring); ``n`` points in all. ``value_counts``:
    each parameter's number of declared values, in the space's order (for ``S`` picks)."""

    def __init__(self, init: str, n: int, rng: np.random.Generator,
                 value_counts: Sequence[int]) -> None:
        self.cycle = cycle_of(init)
        self.init, self.n, self.rng = init, n, rng
        self._steps = np.array([max(c - 1, 1) for c in value_counts], dtype=float)
        self._targets: np.ndarray | None = None
        self._indices: np.ndarray | None = None

    def pick(self, pool: np.ndarray, taken: Sequence[int], features: np.ndarray,
             index_rows: Callable[[], np.ndarray], spread_only: bool = False) -> int:
        """A member of ``pool``. ``features``: every candidate's model features;
        ``index_rows()``: every candidate's ``index_matrix`` row (built once, for ``lhs`` and
        ``S``); ``spread_only``: the pool is a prior's favourites (``lhs`` then acts as
        ``alternate``)."""
        if self.cycle is None and not spread_only:
            if self._targets is None:
                self._indices = index_rows()
                self._targets = latin_targets(self.n, self._indices.shape[1], self.rng)
            assert self._indices is not None
            diff = np.abs(self._indices[pool] - self._targets[min(len(taken), self.n - 1)])
            return self._any(pool, np.where(np.isnan(diff), 0.0, diff).sum(axis=1), min)
        cycle = self.cycle or CYCLES["alternate"]
        letter = cycle[len(taken) % len(cycle)]
        if letter == "S":
            if self._indices is None:
                self._indices = index_rows()
            return self._snapped(pool)
        if letter == "M" and taken:
            return self._maximin(pool, taken, features)
        return int(pool[int(self.rng.integers(len(pool)))])

    def _maximin(self, pool: np.ndarray, taken: Sequence[int], features: np.ndarray) -> int:
        """The member of ``pool`` farthest (Euclidean, in features) from every taken one."""
        dist = np.full(len(pool), np.inf)
        for i in taken:
            dist = np.minimum(dist, ((features[pool] - features[i]) ** 2).sum(1))
        return self._any(pool, dist, max)

    def _snapped(self, pool: np.ndarray) -> int:
        """An ``S`` pick (module docstring): a random grid point's nearest member of ``pool``
        in value-index L1 distance (an inactive parameter plays no part), ties to the member
        whose indices sum highest, then at random."""
        assert self._indices is not None
        target = self.rng.integers(0, self._steps + 1)
        best = nearest_then_highest(np.rint(self._indices[pool] * self._steps), target)
        return int(pool[best[int(self.rng.integers(len(best)))]])

    def _any(self, pool: np.ndarray, score: np.ndarray, best: Callable[..., float]) -> int:
        """One of the members of ``pool`` whose score is ``best`` (min or max), at random."""
        ties = np.flatnonzero(score == best(score))
        return int(pool[ties[int(self.rng.integers(len(ties)))]])
