"""The matmul with a search space that knows no hardware limits: only a static check (compiling
for the GPU) can tell which of its configs would not launch or would spill."""

from __future__ import annotations

import dataclasses

from search_spaces import Constraint
from search_spaces import SearchSpace
from search_spaces.matmul import matmul_space
from tuner.kernels.matmul import MATMUL

_space = matmul_space()
UNCONSTRAINED = dataclasses.replace(
    MATMUL, name="matmul-unconstrained",
    space=SearchSpace(name="matmul-unconstrained", params=_space.params, constraints=(
        Constraint.of("tile_fits_problem",
                      dims=(("BLOCK_M", "M"), ("BLOCK_N", "N"), ("BLOCK_K", "K"))),)))
