"""A tutorial-style ``@triton.autotune`` kernel, tuned by the service with no glue.

    tuner tune examples/byo_softmax.py:softmax --shape n_rows=64,n_cols=1000 --dtype fp32

The conventions (``tuner/kernels/convention.py``): the launcher ``softmax`` is what users call
and returns its output; ``softmax_inputs`` makes its arguments for a problem named by the
decorator's ``key``; ``softmax_reference`` is the torch answer. Nothing else is needed. In
production, replace ``triton.autotune`` by ``tuner.autotune`` to launch with the tuned configs
(``examples/use_autotune.py`` does it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
             triton.Config({"BLOCK_SIZE": 2048}, num_warps=8)],
    key=["n_rows", "n_cols"],
)
@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax of a 2-D tensor whose rows fit one block (n_cols ≤ BLOCK_SIZE)."""
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](x, y, n_rows, n_cols)
    return y


def softmax_inputs(n_rows: int, n_cols: int, dtype: torch.dtype, device: str) -> tuple:
    return (torch.randn(n_rows, n_cols, dtype=dtype, device=device),)


def softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1)
