"""The flash-attention forward space: query and key/value block sizes, warps, stages.

Constraints (head dim ``D`` from the problem):

* tiles no larger than the sequence needs (``next_pow2(S)``, minimum 16);
* shared memory: one Q tile plus ``num_stages`` K and V tiles,
  ``(BLOCK_M·D + 2·num_stages·BLOCK_N·D)·s`` bytes, must fit the target's opt-in limit;
* registers: the fp32 output accumulator and the score tile,
  ``BLOCK_M·(D + BLOCK_N) / threads``, must stay within 255 per thread;
* no idle warps: at most ``BLOCK_M/16`` warps (each warp owns 16 query rows of the MMA).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from search_spaces.constraints import Constraint
from search_spaces.constraints import register
from search_spaces.context import Context
from search_spaces.params import IntRange
from search_spaces.params import PowerOfTwo
from search_spaces.space import SearchSpace

HEAD_DIMS = (16, 32, 64, 128)


@register("attention_smem_fits", "Q, K and V tiles exceed the shared memory per block")
def attention_smem_fits(config: Mapping[str, Any], ctx: Context) -> bool:
    limit = ctx.target.smem_per_block_bytes
    d = ctx.problem["D"]
    need = (config["BLOCK_M"] * d + 2 * config["num_stages"] * config["BLOCK_N"] * d)
    return limit is None or need * ctx.elem_bytes <= limit


@register("attention_regs", "accumulator and score tile exceed 255 registers per thread")
def attention_regs(config: Mapping[str, Any], ctx: Context) -> bool:
    limit = ctx.target.max_regs_per_thread
    threads = config["num_warps"] * ctx.target.warp_size
    return limit is None or config["BLOCK_M"] * (ctx.problem["D"] + config["BLOCK_N"]) \
        / threads <= limit


@register("attention_warps_fit", "more warps than query rows for them (BLOCK_M/16)")
def attention_warps_fit(config: Mapping[str, Any], ctx: Context) -> bool:
    return int(config["num_warps"]) <= max(1, int(config["BLOCK_M"]) // 16)


def attention_space(name: str) -> SearchSpace:
    """BLOCK_M, BLOCK_N ∈ 16…256, num_warps ∈ 1…16, num_stages ∈ 1…5."""
    return SearchSpace(
        name=name,
        params=(
            PowerOfTwo("BLOCK_M", 16, 256),
            PowerOfTwo("BLOCK_N", 16, 256),
            PowerOfTwo("num_warps", 1, 16),
            IntRange("num_stages", 1, 5),
        ),
        constraints=(
            Constraint.of("tile_fits_problem", dims=(("BLOCK_M", "S"), ("BLOCK_N", "S"))),
            Constraint.of("attention_smem_fits"),
            Constraint.of("attention_regs"),
            Constraint.of("attention_warps_fit"),
        ),
        # The Triton tutorial's forward configs for Hopper: (128, 64/128) tiles, 4–8 warps.
        seeds=SearchSpace.freeze_seeds([
            {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
            {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3},
            {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4},
        ]),
    )
