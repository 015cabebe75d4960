"""A small program whose Triton kernels are written as libraries write them, for
``tuner capture``: a Liger-style launcher that picks ``BLOCK_SIZE`` and ``num_warps`` in Python
from the row length (a tuple grid, one program per row), and an ``@triton.autotune`` kernel
with a callable grid."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_rows_kernel(X, Y, stride, n_cols, scale, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    x = tl.load(X + row * stride + offs, mask=mask)
    tl.store(Y + row * stride + offs, x * scale, mask=mask)


def scale_rows(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Each row times ``scale``; the block covers a whole row (as Liger's launchers choose)."""
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    _scale_rows_kernel[(n_rows,)](x, y, x.stride(0), n_cols, scale, BLOCK_SIZE=block,
                                  num_warps=4 if block < 2048 else 8)
    return y


# One config: Triton's autotuner cannot benchmark several on the interpreter (no driver).
@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def _add_kernel(A, B, C, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(C + offs, tl.load(A + offs, mask=mask) + tl.load(B + offs, mask=mask), mask=mask)


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = torch.empty_like(a)
    n = a.numel()
    _add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](a, b, c, n)
    return c


@triton.jit
def _gather_rows_kernel(X, IDX, Y, OUT_DTYPE: tl.constexpr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    src = tl.load(IDX + row)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    value = tl.load(X + src * n_cols + offs, mask=mask).to(OUT_DTYPE)
    tl.store(Y + row * n_cols + offs, value, mask=mask)


def gather_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows of ``x`` in the order ``idx`` names (an index tensor decides what is correct)."""
    y = x.new_empty(idx.numel(), x.shape[1])
    # a constexpr (a Triton dtype, as Liger passes one) between runtime arguments
    _gather_rows_kernel[(idx.numel(),)](x, idx, y, tl.float32, x.shape[1],
                                        BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return y


if __name__ == "__main__":
    torch.manual_seed(0)
    for _ in range(3):
        x = torch.randn(16, 100)
        torch.testing.assert_close(scale_rows(x, 2.0), x * 2.0)
        a = torch.randn(1000)
        torch.testing.assert_close(add(a, a), a + a)
    scale_rows(torch.randn(8, 300), 0.5)
    table, order = torch.randn(10, 64), torch.tensor([7, 7, 0, 3])
    torch.testing.assert_close(gather_rows(table, order), table[order])
