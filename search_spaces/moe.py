"""The fused-MoE search space: the meta-parameters vLLM's and SGLang's fused-MoE kernel takes
(``BLOCK_SIZE_M/N/K``, ``GROUP_SIZE_M``, ``num_warps``, ``num_stages``), over the values their
grid-search scripts try, with the matmul space's hardware limits (shared memory of the
pipeline, accumulator registers) under these names.

Dimensions of a problem: ``M`` tokens, ``E`` experts, ``N`` output columns per expert, ``K``
hidden size, ``topk`` experts per token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from search_spaces.constraints import Constraint
from search_spaces.constraints import register
from search_spaces.context import Context
from search_spaces.params import Choice
from search_spaces.space import SearchSpace

#: The full grid of the grid-search scripts' compute-bound configs, per parameter.
GRID: dict[str, tuple[int, ...]] = {
    "BLOCK_SIZE_M": (16, 32, 64, 128, 256),
    "BLOCK_SIZE_N": (32, 64, 128, 256),
    "BLOCK_SIZE_K": (64, 128, 256),
    "GROUP_SIZE_M": (1, 16, 32, 64),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
}
#: A small-batch default, measured first (the shape of the libraries' fallback for small M).
DEFAULT_CONFIG = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64,
                  "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 2}


@register("moe_smem_fits", "pipeline tiles exceed the shared memory per block")
def moe_smem_fits(config: Mapping[str, Any], ctx: Context) -> bool:
    limit = ctx.target.smem_per_block_bytes
    bm, bn, bk = (int(config[k]) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"))
    used = max(1, int(config["num_stages"])) * (bm * bk + bk * bn) * ctx.elem_bytes
    return limit is None or used <= limit


@register("moe_acc_regs", "the fp32 accumulator needs more registers per thread than allowed")
def moe_acc_regs(config: Mapping[str, Any], ctx: Context) -> bool:
    limit = ctx.target.max_regs_per_thread
    threads = int(config["num_warps"]) * ctx.target.warp_size
    return limit is None or \
        int(config["BLOCK_SIZE_M"]) * int(config["BLOCK_SIZE_N"]) / threads <= limit


def moe_space() -> SearchSpace:
    """The grid-search scripts' grid as a space, with the default config tried first."""
    return SearchSpace(
        name="fused_moe",
        params=tuple(Choice(name, values) for name, values in GRID.items()),
        constraints=(
            Constraint.of("tile_fits_problem",
                          dims=(("BLOCK_SIZE_N", "N"), ("BLOCK_SIZE_K", "K")), minimum=32),
            Constraint.of("moe_smem_fits"),
            Constraint.of("moe_acc_regs"),
            Constraint.of("threads_per_block"),
        ),
        seeds=SearchSpace.freeze_seeds([DEFAULT_CONFIG]),
    )


def grid_size() -> int:
    """Configs in the full grid (before constraints)."""
    size = 1
    for values in GRID.values():
        size *= len(values)
    return size
