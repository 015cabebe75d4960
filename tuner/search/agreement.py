"""How far a search's prior agrees with what was measured (``ModelSearch.trust``).

Both functions take the prior's value of every candidate (``prior``, indexed by candidate) and
the measured log fraction of each measured candidate (``observed``; ``None`` for a failure)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tuner.search.gp import rank_agreement


def overall(prior: np.ndarray, observed: Mapping[int, float | None], least: int) -> float | None:
    """Spearman's rank correlation between the prior and the measured log fractions over
    every measured candidate, failures below every success; ``None`` before ``least`` are
    measured."""
    if len(observed) < least:
        return None
    measured = list(observed)
    ok = [y for y in observed.values() if y is not None]
    floor = min(ok) - 1.0 if ok else 0.0
    y = np.array([floor if observed[i] is None else observed[i] for i in measured], dtype=float)
    return rank_agreement(prior[measured], y)


def better_half(prior: np.ndarray, observed: Mapping[int, float | None],
                least: int) -> float | None:
    """Spearman's rank correlation between the prior and the measured log fractions over the
    successes at or above their median: whether the prior orders the good configs (a prior
    can be right about poor configs and wrong about good ones); ``None`` before ``least``
    successes."""
    ok = [(i, y) for i, y in observed.items() if y is not None]
    if not ok or len(ok) < least:
        return None
    cut = float(np.median([y for _, y in ok]))
    top = [(i, y) for i, y in ok if y >= cut]
    return rank_agreement(prior[[i for i, _ in top]], np.array([y for _, y in top], dtype=float))
