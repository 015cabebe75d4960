"""The space of a fusion chain: linear → bias → gelu → residual add → layernorm.

``grouping`` chooses how the chain is split into kernels, and each grouping brings its own
parameters (conditional, Optuna define-by-run):

=============  =====================================================  ==========================
grouping       kernels                                                 parameters
=============  =====================================================  ==========================
``unfused``    matmul | +bias | gelu | +residual | layernorm (5)      matmul, EW_*, LN_*
``separate``   matmul | bias+gelu+residual | layernorm (3)            matmul, EW_*, LN_*
``epilogue``   matmul+bias+gelu+residual | layernorm (2)              matmul, LN_*
``full``       one kernel; its tile spans the whole row (N ≤ 256)     matmul less BLOCK_N/GROUP_M
=============  =====================================================  ==========================

The matmul constraints (``search_spaces.matmul``) apply to every grouping, with BLOCK_N = the
padded N for ``full``; the row-wise ones (``search_spaces.rowwise``) to the layernorm and
elementwise kernels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from search_spaces.constraints import Constraint
from search_spaces.constraints import next_pow2
from search_spaces.constraints import register
from search_spaces.constraints import threads_per_block
from search_spaces.constraints import tile_fits_problem
from search_spaces.context import Context
from search_spaces.matmul import matmul_acc_regs
from search_spaces.matmul import matmul_cta_regs
from search_spaces.matmul import matmul_smem_fits
from search_spaces.matmul import warps_fit_tile
from search_spaces.params import Categorical
from search_spaces.params import Choice
from search_spaces.params import IntRange
from search_spaces.params import PowerOfTwo
from search_spaces.params import when
from search_spaces.rowwise import row_regs as row_regs  # registers the row-wise constraints
from search_spaces.space import SearchSpace

GROUPINGS = ("unfused", "separate", "epilogue", "full")
#: The widest row one ``full`` tile may span.
FULL_MAX_N = 256
_SPLIT = when(grouping=("unfused", "separate", "epilogue"))
_ELEMENTWISE = when(grouping=("unfused", "separate"))


def effective_matmul_config(config: Mapping[str, Any], n: int) -> dict[str, Any]:
    """The matmul part of a chain config; ``full`` tiles span the padded row."""
    mm = {k: config[k] for k in ("BLOCK_M", "BLOCK_K", "num_warps", "num_stages")}
    mm["BLOCK_N"] = config["BLOCK_N"] if "BLOCK_N" in config else max(16, next_pow2(n))
    mm["GROUP_M"] = config.get("GROUP_M", 1)
    return mm


@register("chain_matmul_fits", "the chain's matmul tile breaks a matmul constraint")
def chain_matmul_fits(config: Mapping[str, Any], ctx: Context) -> bool:
    n = ctx.problem["N"]
    if config.get("grouping") == "full" and max(16, next_pow2(n)) > FULL_MAX_N:
        return False
    mm = effective_matmul_config(config, n)
    dims = (("BLOCK_M", "M"), ("BLOCK_N", "N"), ("BLOCK_K", "K"))
    return (tile_fits_problem(mm, ctx, dims=dims) and matmul_smem_fits(mm, ctx)
            and matmul_acc_regs(mm, ctx) and matmul_cta_regs(mm, ctx)
            and warps_fit_tile(mm, ctx) and threads_per_block(mm, ctx))


def chain_space(name: str) -> SearchSpace:
    """``grouping`` plus the parameters of its kernels (see the module docstring)."""
    return SearchSpace(
        name=name,
        params=(
            Categorical("grouping", GROUPINGS),
            PowerOfTwo("BLOCK_M", 16, 256),
            PowerOfTwo("BLOCK_N", 16, 256, when=_SPLIT),
            PowerOfTwo("BLOCK_K", 16, 256),
            Choice("GROUP_M", (1, 4, 8, 16), when=_SPLIT),
            PowerOfTwo("num_warps", 2, 16),
            IntRange("num_stages", 1, 5),
            PowerOfTwo("EW_BLOCK", 128, 4096, when=_ELEMENTWISE),
            PowerOfTwo("EW_WARPS", 1, 8, when=_ELEMENTWISE),
            PowerOfTwo("LN_BLOCK_N", 16, 16384, when=_SPLIT),
            PowerOfTwo("LN_WARPS", 1, 16, when=_SPLIT),
        ),
        constraints=(
            Constraint.of("chain_matmul_fits"),
            Constraint.of("tile_fits_problem", dims=(("LN_BLOCK_N", "N"),)),
            Constraint.of("row_warps_fit_block", block="LN_BLOCK_N", warps="LN_WARPS"),
            Constraint.of("row_regs", block="LN_BLOCK_N", warps="LN_WARPS"),
            Constraint.of("row_warps_fit_block", block="EW_BLOCK", warps="EW_WARPS"),
        ),
        seeds=SearchSpace.freeze_seeds([
            {"grouping": "full", "BLOCK_M": 64, "BLOCK_K": 64, "num_warps": 4,
             "num_stages": 3},
            {"grouping": "epilogue", "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32,
             "GROUP_M": 8, "num_warps": 4, "num_stages": 4, "LN_BLOCK_N": 1024,
             "LN_WARPS": 4},
        ]),
    )
