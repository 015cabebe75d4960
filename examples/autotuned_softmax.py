"""A kernel already written with ``@triton.autotune``, tuned as is by the service.

    tuner tune --kernel examples/autotuned_softmax.py:SOFTMAX_AUTOTUNED --shape M=64,N=1000

``from_autotune`` turns the decorator's config list into the starting point of a search space
(each value widened by a power of two each way) and its configs into the first ones measured;
the rest of the spec says how to make inputs, check results and count the work.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from search_spaces import Constraint
from tuner.kernels.byo import from_autotune

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


@triton.autotune(
    configs=[triton.Config({"BLOCK_N": 1024}, num_warps=4),
             triton.Config({"BLOCK_N": 2048}, num_warps=8)],
    key=["N"],
)
@triton.jit
def softmax_rows(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    """Softmax of one row per program; a row wider than BLOCK_N is not supported."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
    x = tl.where(cols < N, x, -1e30)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * N + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty),
             mask=cols < N)


def make_inputs(problem, dtype, seed, device):  # type: ignore[no-untyped-def]
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (problem["M"], problem["N"])
    return {"x": torch.randn(shape, generator=gen, device=device).to(DTYPES[dtype]),
            "y": torch.empty(shape, device=device, dtype=DTYPES[dtype])}


SOFTMAX_AUTOTUNED = from_autotune(
    softmax_rows,
    name="softmax_autotuned",
    dims=("M", "N"),
    dtypes=tuple(DTYPES),
    make_inputs=make_inputs,
    args=lambda t, p: {"x_ptr": t["x"], "y_ptr": t["y"], "N": p["N"]},
    grid=lambda p, config: (p["M"],),
    reference=lambda t, p: torch.softmax(t["x"].float(), dim=-1),
    output="y",
    flops=lambda p, dtype: 5.0 * p["M"] * p["N"],
    min_bytes=lambda p, dtype: 2.0 * p["M"] * p["N"] * (4 if dtype == "fp32" else 2),
    tolerance={"fp32": 1e-5, "fp16": 2e-3},
    compute_dtype=lambda dtype: "fp32",
    # The kernel holds a whole row in one block, and a block wider than the row is waste.
    constraints=(Constraint.of("tile_covers_problem", dims=(("BLOCK_N", "N"),)),
                 Constraint.of("tile_fits_problem", dims=(("BLOCK_N", "N"),))),
)
