"""A bring-your-own kernel by convention, using what @triton.autotune offers: two outputs, an
accumulator zeroed by reset_to_zero, prune_configs_by, and a neighbour module import."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from byo_helpers import SCALE  # the file's folder is on sys.path


def _no_big_blocks(configs, named_args, **kwargs):  # type: ignore[no-untyped-def]
    return [c for c in configs if c.kwargs["BLOCK"] < 1024]


@triton.autotune(
    configs=[triton.Config({"BLOCK": 1024}, num_warps=4, num_stages=1),
             triton.Config({"BLOCK": 256}, num_warps=4, num_stages=1)],
    key=["n"],
    reset_to_zero=["acc_ptr"],
    prune_configs_by={"early_config_prune": _no_big_blocks},
)
@triton.jit
def scale_and_sum_kernel(x_ptr, y_ptr, acc_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x * scale, mask=offs < n)
    tl.atomic_add(acc_ptr, tl.sum(x, axis=0))


def scale_and_sum(x: torch.Tensor, acc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(SCALE·x, Σx): the sum accumulates into ``acc``, which the decorator zeroes."""
    y = torch.empty_like(x)
    n = x.numel()
    scale_and_sum_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, acc, n, SCALE)
    return y, acc


def scale_and_sum_inputs(n, dtype, device):  # type: ignore[no-untyped-def]
    # The accumulator starts dirty: only the decorator's reset_to_zero makes the sum right.
    return torch.rand(n, dtype=dtype, device=device), torch.full((1,), 5.0, device=device)


def scale_and_sum_reference(x, acc):  # type: ignore[no-untyped-def]
    return x.float() * SCALE, x.float().sum().reshape(1)


scale_and_sum_dtypes = ("fp32",)
scale_and_sum_tolerance = {"fp32": 1e-5}
