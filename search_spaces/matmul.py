"""The matmul search space: tile sizes, grouped ordering, warps and pipeline stages.

Constraints follow ``docs/PERFORMANCE_FACTS.md`` §3:

* shared memory: ``num_stages · (BLOCK_M·BLOCK_K + BLOCK_K·BLOCK_N) · elem_bytes`` must fit the
  target's opt-in shared memory per block (232448 B on H100/H200);
* registers: the fp32 accumulator needs ``BLOCK_M·BLOCK_N / (32·num_warps)`` registers per
  thread, which must not exceed the target's 255, and ``BLOCK_M·BLOCK_N`` plus 32 per thread
  must fit the SM's 65,536-register file;
* tiles no larger than the problem needs (``next_pow2`` of the dimension, minimum 16, the
  smallest tile ``tl.dot`` accepts);
* no idle warps: more warps than ``BLOCK_M·BLOCK_N/256`` (with a floor of 2) have no work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from search_spaces.constraints import Constraint
from search_spaces.constraints import register
from search_spaces.context import Context
from search_spaces.params import Choice
from search_spaces.params import IntRange
from search_spaces.params import PowerOfTwo
from search_spaces.space import SearchSpace

#: Triton's 03-matrix-multiplication tutorial configs for CUDA, as
#: (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps); GROUP_M = 8 throughout.
TUTORIAL_CONFIGS: tuple[tuple[int, int, int, int, int], ...] = (
    (128, 256, 64, 3, 8),
    (64, 256, 32, 4, 4),
    (128, 128, 32, 4, 4),
    (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (128, 32, 32, 4, 4),
    (64, 32, 32, 5, 2),
    (32, 64, 32, 5, 2),
)


def tutorial_configs() -> list[dict[str, int]]:
    """The tutorial list as config dicts of this space."""
    return [
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_warps": w,
         "num_stages": s}
        for bm, bn, bk, s, w in TUTORIAL_CONFIGS
    ]


def pipeline_smem_bytes(config: Mapping[str, Any], elem_bytes: int) -> int:
    """Shared memory of the software pipeline: one A and one B tile per stage, in bytes."""
    stages = max(1, int(config["num_stages"]))
    bm, bn, bk = int(config["BLOCK_M"]), int(config["BLOCK_N"]), int(config["BLOCK_K"])
    return stages * (bm * bk + bk * bn) * elem_bytes


def accumulator_regs_per_thread(config: Mapping[str, Any], warp_size: int = 32) -> float:
    """fp32 accumulator registers each thread holds: BLOCK_M·BLOCK_N / threads."""
    threads = int(config["num_warps"]) * warp_size
    return int(config["BLOCK_M"]) * int(config["BLOCK_N"]) / threads


@register("matmul_smem_fits", "pipeline tiles exceed the shared memory per block")
def matmul_smem_fits(config: Mapping[str, Any], ctx: Context) -> bool:
    limit = ctx.target.smem_per_block_bytes
    return limit is None or pipeline_smem_bytes(config, ctx.elem_bytes) <= limit


@register("matmul_acc_regs", "the fp32 accumulator needs more registers per thread than allowed")
def matmul_acc_regs(config: Mapping[str, Any], ctx: Context) -> bool:
    limit = ctx.target.max_regs_per_thread
    return limit is None or accumulator_regs_per_thread(config, ctx.target.warp_size) <= limit


@register("matmul_cta_regs", "the CTA's fp32 accumulators alone fill an SM's register file")
def matmul_cta_regs(config: Mapping[str, Any], ctx: Context) -> bool:
    """``BLOCK_M·BLOCK_N`` accumulator registers plus 32 per thread for everything else must
    fit the 65,536-register file of one SM, or the CTA cannot launch without spilling."""
    limit = ctx.target.regs_per_sm
    threads = int(config["num_warps"]) * ctx.target.warp_size
    return limit is None or int(config["BLOCK_M"]) * int(config["BLOCK_N"]) + 32 * threads <= limit


@register("warps_fit_tile", "more warps than the tile has work for (BLOCK_M·BLOCK_N/256)")
def warps_fit_tile(config: Mapping[str, Any], ctx: Context, *, m: str = "BLOCK_M",
                   n: str = "BLOCK_N") -> bool:
    return int(config["num_warps"]) <= max(2, int(config[m]) * int(config[n]) // 256)


def matmul_space() -> SearchSpace:
    """BLOCK_M/N/K ∈ 16…256, GROUP_M ∈ {1, 2, 4, 8, 16}, num_warps ∈ {2…16}, num_stages ∈ 1…5."""
    return SearchSpace(
        name="matmul",
        params=(
            PowerOfTwo("BLOCK_M", 16, 256),
            PowerOfTwo("BLOCK_N", 16, 256),
            PowerOfTwo("BLOCK_K", 16, 256),
            Choice("GROUP_M", (1, 2, 4, 8, 16)),
            PowerOfTwo("num_warps", 2, 16),
            IntRange("num_stages", 1, 5),
        ),
        constraints=(
            Constraint.of("tile_fits_problem",
                          dims=(("BLOCK_M", "M"), ("BLOCK_N", "N"), ("BLOCK_K", "K"))),
            Constraint.of("matmul_smem_fits"),
            Constraint.of("matmul_acc_regs"),
            Constraint.of("matmul_cta_regs"),
            Constraint.of("warps_fit_tile"),
            Constraint.of("threads_per_block"),
        ),
        seeds=SearchSpace.freeze_seeds(tutorial_configs()),
    )
