"""A launcher by convention whose FLOP count raises: every trial fails, the job finishes."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})],
                 key=["n"])
@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def copy(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    copy_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y


def copy_inputs(n, dtype, device):  # type: ignore[no-untyped-def]
    return (torch.rand(n, dtype=dtype, device=device),)


def copy_reference(x):  # type: ignore[no-untyped-def]
    return x.clone()


def copy_flops(n):  # type: ignore[no-untyped-def]
    return n / 0
