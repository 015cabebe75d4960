"""A public library's kernel tuned through the bring-your-own convention: Liger-Kernel's RMSNorm
forward (``liger_kernel.ops.rms_norm._rms_norm_forward_kernel``, Llama casting mode).

    tuner tune benchmarks/gpu/liger_rmsnorm.py:rms_norm --shape n_cols=4096 --dtype bf16

The library's code is not part of this repository: ``benchmarks/gpu/fetch_liger.sh`` exports its
``src/`` into ``.liger/src`` (ignored by git), which this module puts on ``sys.path``
(``LIGER_SRC`` overrides the folder). Liger's launcher picks ``BLOCK_SIZE`` (the row length
rounded up to a power of two) and ``num_warps`` by row length (``calculate_settings``); that
choice for 4096 columns seeds the space here, which the service widens a power of two each
way. A ``BLOCK_SIZE`` below the row length computes a wrong norm and is a ``wrong_result``
trial, never a best config. Rows are fixed at ``ROWS`` (the kernel's arguments carry no row
count to key on). Under the interpreter it cannot run (``rsqrt`` from libdevice); it compiles
for ``sm_90`` anywhere (``--backend standin:h200``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import triton

_SRC = Path(os.environ.get("LIGER_SRC", Path(__file__).resolve().parents[2] / ".liger" / "src"))
if str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

from liger_kernel.ops.rms_norm import _rms_norm_forward_kernel  # noqa: E402
from liger_kernel.ops.utils import calculate_settings  # noqa: E402

ROWS = 16384
EPS = 1e-6
LLAMA = 0  # Liger's casting mode: the norm in fp32, the weight multiply in the input dtype
_BLOCK, _WARPS = calculate_settings(4096)

liger_rms_norm_forward = triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": _BLOCK}, num_warps=_WARPS)], key=["n_cols"],
)(_rms_norm_forward_kernel)


def rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Liger's forward launch with the meta-parameters left to the autotuner."""
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    liger_rms_norm_forward[(n_rows,)](y, y.stride(0), x, x.stride(0), w, w.stride(0), rstd,
                                      rstd.stride(0), n_cols, EPS, 0.0, LLAMA,
                                      elementwise_affine=True)
    return y


def rms_norm_inputs(n_cols: int, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    return (torch.randn(ROWS, n_cols, dtype=dtype, device=device),
            torch.randn(n_cols, dtype=dtype, device=device))


def rms_norm_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)
    return normed.float() * w.float()


def rms_norm_bytes(n_cols: int, dtype: str) -> float:
    """Read x and w, write y (and the fp32 rstd per row)."""
    elem = 4 if dtype == "fp32" else 2
    return float(2 * ROWS * n_cols * elem + n_cols * elem + 4 * ROWS)


rms_norm_dtypes = ("fp32", "fp16", "bf16")
rms_norm_tolerance = {"bf16": 2e-2, "fp16": 4e-3}
