"""Row-wise kernels over an M×N input: softmax, layernorm and rmsnorm (forward).

One program per row. When ``BLOCK_N`` covers the row the program reads it once; otherwise it
walks the row in ``BLOCK_N`` chunks twice (statistics, then output). Arithmetic is fp32 whatever
the input dtype; the output has the input's dtype.

Counts (``docs/PERFORMANCE_FACTS.md`` §4): all three are memory-bound, so the bytes
decide the roofline. Minimum bytes: softmax ``M·N·(s_in + s_out)``; layernorm adds ``2·N·s`` for
weight and bias; rmsnorm adds ``N·s`` for the weight (these forward kernels do not store mean or
rstd). FLOPs, one per arithmetic step per element: softmax 5·M·N (max, subtract, exp, sum,
divide), layernorm 7·M·N (sum, subtract, square, sum, scale, weight, bias), rmsnorm 4·M·N
(square, sum, scale, weight).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from search_spaces import DTYPE_BYTES
from search_spaces.rowwise import rowwise_space
from tuner.kernels.matmul import TORCH_DTYPES
from tuner.kernels.spec import KernelSpec
from tuner.kernels.spec import Problem

EPS = 1e-5
#: Masked lanes of a softmax row: finite, so that exp(NEG - max) is 0 and never NaN
#: (a ``constexpr``: compiled kernels may read no other kind of global).
NEG = tl.constexpr(-1e30)
DTYPES = ("fp32", "fp16", "bf16")
TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr,
                    ONE_PASS: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK_N)
    if ONE_PASS:
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x, NEG)
        e = tl.exp(x - tl.max(x, 0))
        tl.store(y_row + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=cols < N)
    else:
        m = tl.full((BLOCK_N,), NEG, tl.float32)
        s = tl.zeros((BLOCK_N,), tl.float32)
        for start in range(0, N, BLOCK_N):  # online softmax: running max and rescaled sum
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=0.0).to(tl.float32)
            x = tl.where(start + cols < N, x, NEG)
            m_new = tl.maximum(m, x)
            s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
            m = m_new
        row_max = tl.max(m, 0)
        total = tl.sum(s * tl.exp(m - row_max), 0)
        for start in range(0, N, BLOCK_N):
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=0.0).to(tl.float32)
            y = tl.exp(x - row_max) / total
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=start + cols < N)


@triton.jit
def _norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, stride_x, stride_y, eps,
                 BLOCK_N: tl.constexpr, ONE_PASS: tl.constexpr, RMS: tl.constexpr):
    """Layernorm (``RMS`` false: subtract the mean, add the bias) or rmsnorm of one row."""
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK_N)
    if ONE_PASS:
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        mean = 0.0 if RMS else tl.sum(x, 0) / N
        diff = tl.where(cols < N, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, 0) / N + eps)
        y = diff * rstd * tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        if not RMS:
            y += tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N)
    else:
        acc = tl.zeros((BLOCK_N,), tl.float32)
        acc_sq = tl.zeros((BLOCK_N,), tl.float32)
        for start in range(0, N, BLOCK_N):
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=0.0).to(tl.float32)
            acc += x
            acc_sq += x * x
        mean = 0.0 if RMS else tl.sum(acc, 0) / N
        var = tl.sum(acc_sq, 0) / N - mean * mean
        rstd = 1.0 / tl.sqrt(var + eps)
        for start in range(0, N, BLOCK_N):
            mask = start + cols < N
            x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
            y = (x - mean) * rstd * tl.load(w_ptr + start + cols, mask=mask,
                                            other=0.0).to(tl.float32)
            if not RMS:
                y += tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _inputs(weights: int) -> Callable[[Problem, str, int, str], dict[str, torch.Tensor]]:
    """Seeded inputs: x (M×N, standard normal), ``weights`` vectors of N (w ≈ 1, b ≈ 0), y."""

    def make_inputs(problem: Problem, dtype: str, seed: int,
                    device: str) -> dict[str, torch.Tensor]:
        gen = torch.Generator(device=device).manual_seed(seed)
        m, n = problem["M"], problem["N"]
        tdt = TORCH_DTYPES[dtype]
        tensors = {"x": torch.randn((m, n), generator=gen, device=device).to(tdt)}
        if weights >= 1:
            tensors["w"] = (1 + 0.1 * torch.randn((n,), generator=gen, device=device)).to(tdt)
        if weights >= 2:
            tensors["b"] = (0.1 * torch.randn((n,), generator=gen, device=device)).to(tdt)
        tensors["y"] = torch.empty((m, n), device=device, dtype=tdt)
        return tensors

    return make_inputs


def _one_pass(problem: Problem, config: Mapping[str, Any]) -> bool:
    return int(config["BLOCK_N"]) >= problem["N"]


def launch_softmax(tensors: dict[str, torch.Tensor], problem: Problem,
                   config: Mapping[str, Any]) -> None:
    x, y = tensors["x"], tensors["y"]
    _softmax_kernel[(problem["M"],)](x, y, problem["N"], x.stride(0), y.stride(0),
                                     BLOCK_N=config["BLOCK_N"],
                                     ONE_PASS=_one_pass(problem, config),
                                     num_warps=config["num_warps"])


def launch_norm(tensors: dict[str, torch.Tensor], problem: Problem, config: Mapping[str, Any],
                *, x: str = "x", y: str = "y", w: str = "w", b: str | None = "b",
                rms: bool = False) -> None:
    """Layernorm (or, with ``rms``, rmsnorm) of ``tensors[x]`` into ``tensors[y]``."""
    xt, yt, wt = tensors[x], tensors[y], tensors[w]
    _norm_kernel[(problem["M"],)](xt, wt, tensors[b] if b else wt, yt, problem["N"],
                                  xt.stride(0), yt.stride(0), EPS, BLOCK_N=config["BLOCK_N"],
                                  ONE_PASS=_one_pass(problem, config), RMS=rms,
                                  num_warps=config["num_warps"])


def rms_norm_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()


def _bytes(vectors: int) -> Callable[[Problem, str], float]:
    def min_bytes(problem: Problem, dtype: str) -> float:
        s = DTYPE_BYTES[dtype]
        return float(s * (2 * problem["M"] * problem["N"] + vectors * problem["N"]))

    return min_bytes


def _flops(per_element: int) -> Callable[[Problem, str], float]:
    return lambda problem, dtype: float(per_element * problem["M"] * problem["N"])


def _rowwise(name: str, description: str, weights: int, flops_per_element: int,
             launch: Callable[[dict[str, torch.Tensor], Problem, Mapping[str, Any]], None],
             reference: Callable[[dict[str, torch.Tensor], Problem], torch.Tensor],
             ) -> KernelSpec:
    return KernelSpec(
        name=name, description=description, dims=("M", "N"), dtypes=DTYPES,
        space=rowwise_space(name), make_inputs=_inputs(weights), launch=launch,
        reference=reference, output="y", flops=_flops(flops_per_element),
        min_bytes=_bytes(weights), tolerance=TOLERANCE, compute_dtype=lambda dtype: "fp32",
        tensor_elements=lambda p: p["M"] * p["N"], example_problem={"M": 4096, "N": 4096},
    )


SOFTMAX = _rowwise(
    "softmax", "softmax over the last dimension of an M×N input", 0, 5, launch_softmax,
    lambda t, p: torch.softmax(t["x"].float(), dim=-1))
LAYERNORM = _rowwise(
    "layernorm", "layernorm over the last dimension (weight and bias, eps 1e-5)", 2, 7,
    launch_norm,
    lambda t, p: F.layer_norm(t["x"].float(), (p["N"],), t["w"].float(), t["b"].float(), EPS))
RMSNORM = _rowwise(
    "rmsnorm", "rmsnorm over the last dimension (weight, eps 1e-5)", 1, 4,
    lambda t, p, c: launch_norm(t, p, c, b=None, rms=True),
    lambda t, p: rms_norm_reference(t["x"], t["w"]))
