"""The search space of row-wise kernels (softmax, layernorm, rmsnorm): one program per row.

* ``BLOCK_N``: the columns one program holds at once, 16…16384; a row longer than the block is
  walked in chunks (two passes over it), a row that fits is read once;
* ``num_warps``: 1…16, no more than one warp per 32 columns of the block;
* registers: the block's fp32 values spread over the threads must stay ≤ 64 per thread, or the
  kernel spills.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from search_spaces.constraints import Constraint
from search_spaces.constraints import register
from search_spaces.context import Context
from search_spaces.params import PowerOfTwo
from search_spaces.space import SearchSpace

#: fp32 values of the block one thread may hold before the kernel spills.
ROW_VALUES_PER_THREAD = 64


@register("row_warps_fit_block", "more warps than the block has columns for (BLOCK_N/32)")
def row_warps_fit_block(config: Mapping[str, Any], ctx: Context, *, block: str = "BLOCK_N",
                        warps: str = "num_warps") -> bool:
    if block not in config:
        return True
    return int(config[warps]) * ctx.target.warp_size <= max(32, int(config[block]))


@register("row_regs", "the block's values exceed 64 fp32 registers per thread")
def row_regs(config: Mapping[str, Any], ctx: Context, *, block: str = "BLOCK_N",
             warps: str = "num_warps") -> bool:
    if block not in config:
        return True
    threads = int(config[warps]) * ctx.target.warp_size
    return int(config[block]) / threads <= ROW_VALUES_PER_THREAD


def rowwise_space(name: str) -> SearchSpace:
    """BLOCK_N ∈ 16…16384, num_warps ∈ 1…16 (see the module docstring)."""
    return SearchSpace(
        name=name,
        params=(PowerOfTwo("BLOCK_N", 16, 16384), PowerOfTwo("num_warps", 1, 16)),
        constraints=(
            Constraint.of("tile_fits_problem", dims=(("BLOCK_N", "N"),)),
            Constraint.of("row_warps_fit_block"),
            Constraint.of("row_regs"),
        ),
        seeds=SearchSpace.freeze_seeds([{"BLOCK_N": 1024, "num_warps": 4},
                                        {"BLOCK_N": 4096, "num_warps": 8}]),
    )
