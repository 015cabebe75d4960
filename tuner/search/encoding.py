"""Numeric features of configs, for surrogate models over a search space.

An ordered parameter becomes one feature, its value's position in the declared list scaled to
[0, 1] (so 16, 32, …, 256 are evenly spaced, like their logarithms); an unordered one becomes
one indicator per value. A parameter absent from a config (conditional) encodes as all zeros
plus an "absent" indicator.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import numpy as np

from search_spaces import SearchSpace


class Encoder:
    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self._columns: list[tuple[str, Any]] = []
        for p in space.params:
            values = p.values()
            if p.ordered:
                self._columns.append((p.name, ("pos", {v: i / max(1, len(values) - 1)
                                                      for i, v in enumerate(values)})))
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

    def encode(self, config: Mapping[str, Any]) -> np.ndarray:
        row = np.zeros(len(self._columns))
        for i, (name, (kind, arg)) in enumerate(self._columns):
            present = name in config
            if kind == "pos" and present:
                row[i] = arg.get(config[name], 0.0)
            elif kind == "is" and present:
                row[i] = 1.0 if config[name] == arg else 0.0
            elif kind == "absent":
                row[i] = 0.0 if present else 1.0
        return row[self._keep]

    def encode_all(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        if not configs:
            return np.zeros((0, self.width))
        return np.stack([self.encode(c) for c in configs])
