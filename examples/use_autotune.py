"""Production use of a tuned bring-your-own kernel: ``@tuner.autotune`` in place of
``@triton.autotune``, same arguments, call sites unchanged.

    tuner tune examples/byo_softmax.py:softmax --shape n_rows=64,n_cols=1000 --dtype fp32
    TRITON_INTERPRET=1 python examples/use_autotune.py       # no GPU: the interpreter

The kernel below is ``examples/byo_softmax.py``'s with its decorator swapped. A Triton kernel's
results are keyed by its own source (``tuner/kernels/identity.py``), so this copy is served
what the tuning of ``byo_softmax.py`` stored. ``TRITON_PRINT_AUTOTUNING=1`` prints which config
each launch uses; ``softmax_kernel.served(...)`` returns it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import tuner


@tuner.autotune(
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


def main() -> None:
    x = torch.randn(64, 1000)
    y = torch.empty_like(x)
    softmax_kernel[(64,)](x, y, 64, 1000)  # unchanged call site
    error = (y - torch.softmax(x, dim=-1)).abs().max().item()
    served = softmax_kernel.served(x, y, 64, 1000)
    config = " ".join(f"{k}={v}" for k, v in (served["config"] or {}).items() if v is not None)
    print(f"softmax n_rows=64,n_cols=1000 fp32: tier {served['tier']}"
          + (f" (tuned for {served['tuned_for']} on {served['device_kind']}): {config}"
             if served["config"] else " (the kernel's own configs: nothing tuned yet)")
          + (f"; stale: {', '.join(served['stale'])}" if served["stale"] else ""))
    print(f"max abs error {error:.1e}")


if __name__ == "__main__":
    main()
