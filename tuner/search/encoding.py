"""Numeric features of configs, for surrogate models over a search space.

An ordered parameter becomes one feature, its value's position in the declared list scaled to
[0, 1] (so 16, 32, …, 256 are evenly spaced, like their logarithms); an unordered one becomes
one indicator per value. A parameter absent from a config (conditional) encodes as all zeros
plus an "absent" indicator. With ``pow2=True`` an ordered integer parameter whose values mix
powers of two with other positive integers (16, 32, 48, …, 256) gains one more feature, 1.0 at a
power of two: on some GPUs every other block size is ten times slower, a cliff that the value's
position alone, between two good powers of two, cannot express.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import numpy as np

from search_spaces import SearchSpace


def is_power_of_two(value: Any) -> bool:
    """True for the ints 1, 2, 4, 8, … (not for bools or floats)."""
    return (isinstance(value, int) and not isinstance(value, bool) and value > 0
            and value & (value - 1) == 0)


def mixes_powers_of_two(values: Sequence[Any]) -> bool:
    """True when ``values`` are positive ints, some powers of two and some not."""
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                             for v in values):
        return False
    flags = [is_power_of_two(v) for v in values]
    return any(flags) and not all(flags)


class Encoder:
    def __init__(self, space: SearchSpace, pow2: bool = False) -> None:
        self.space = space
        self._columns: list[tuple[str, Any]] = []
        for p in space.params:
            values = p.values()
            if p.ordered:
                self._columns.append((p.name, ("pos", {v: i / max(1, len(values) - 1)
                                                      for i, v in enumerate(values)})))
                if pow2 and mixes_powers_of_two(values):
                    self._columns.append((p.name, ("pow2", None)))
            else:
                for v in values:
                    self._columns.append((p.name, ("is", v)))
            if p.when:
                self._columns.append((p.name, ("absent", None)))
        # Drop features that never vary (single-valued parameters).
        self._keep = [i for i, (name, (kind, arg)) in enumerate(self._columns)
                      if not (kind == "pos" and len(arg) == 1)]

    @property
    def width(self) -> int:
        return len(self._keep)

    @property
    def pow2_columns(self) -> tuple[int, ...]:
        """Positions, among the encoded features, of the power-of-two flags."""
        return tuple(j for j, i in enumerate(self._keep) if self._columns[i][1][0] == "pow2")

    def encode(self, config: Mapping[str, Any]) -> np.ndarray:
        row = np.zeros(len(self._columns))
        for i, (name, (kind, arg)) in enumerate(self._columns):
            present = name in config
            if kind == "pos" and present:
                row[i] = arg.get(config[name], 0.0)
            elif kind == "pow2" and present:
                row[i] = 1.0 if is_power_of_two(config[name]) else 0.0
            elif kind == "is" and present:
                row[i] = 1.0 if config[name] == arg else 0.0
            elif kind == "absent":
                row[i] = 0.0 if present else 1.0
        return row[self._keep]

    def encode_all(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        if not configs:
            return np.zeros((0, self.width))
        return np.stack([self.encode(c) for c in configs])
