"""Flash-attention forward, ``O = softmax(Q·Kᵀ·scale [+ causal mask]) · V``, causal and not.

Q, K, V and O are ``(Z, H, S, D)`` contiguous (batch, heads, sequence, head dim); the kernel also
writes the row log-sum-exp (fp32, ``Z·H·S``) as a training forward does. One program per
``BLOCK_M`` query rows of one (batch, head); it streams ``BLOCK_N`` key/value rows at a time with
the online softmax, in fp32, and never materialises the S×S scores. ``attention_causal`` skips the
key blocks wholly above the diagonal and masks the one that straddles it.

Counts (``docs/PERFORMANCE_FACTS.md`` §4, FlashAttention convention): FLOPs =
4·Z·H·S²·D, halved when causal; minimum bytes = s·4·Z·H·S·D (Q, K, V read, O written) +
4·Z·H·S (LSE); and an exp roof of Z·H·S² exponentials (halved when causal) on the GPU's
special-function units.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from search_spaces import DTYPE_BYTES
from search_spaces.attention import HEAD_DIMS
from search_spaces.attention import attention_space
from tuner.kernels.matmul import INTERPRETED
from tuner.kernels.matmul import TORCH_DTYPES
from tuner.kernels.spec import KernelSpec
from tuner.kernels.spec import Problem

#: Masked scores: finite, so exp(NEG - max) is 0 and never NaN (a ``constexpr``: compiled
#: kernels may read no other kind of global).
NEG = tl.constexpr(-1e30)
DTYPES = ("fp16", "bf16")
TOLERANCE = {"fp16": 5e-3, "bf16": 1e-2}  # DESIGN.md: bf16/fp16 within 1e-3–1e-2


@triton.jit
def _attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, scale, S,
                   D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr, UPCAST: tl.constexpr):
    start_m = tl.program_id(0)
    zh = tl.program_id(1)
    base = zh.to(tl.int64) * S * D
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < S,
                other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full((BLOCK_M,), NEG, tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    hi = tl.minimum(S, (start_m + 1) * BLOCK_M) if CAUSAL else S
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kt = tl.load(k_ptr + base + cols[None, :] * D + offs_d[:, None], mask=cols[None, :] < S,
                     other=0.0)
        v = tl.load(v_ptr + base + cols[:, None] * D + offs_d[None, :], mask=cols[:, None] < S,
                    other=0.0)
        if UPCAST:
            kt = kt.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, kt) * scale
        keep = cols[None, :] < S
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(keep, qk, NEG)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * D + offs_d[None, :],
             acc.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < S)
    tl.store(lse_ptr + zh.to(tl.int64) * S + offs_m, m_i + tl.log(l_i), mask=offs_m < S)


def make_inputs(problem: Problem, dtype: str, seed: int, device: str) -> dict[str, torch.Tensor]:
    """Seeded standard-normal Q, K, V; empty O and LSE."""
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (problem["Z"], problem["H"], problem["S"], problem["D"])
    tdt = TORCH_DTYPES[dtype]
    tensors = {name: torch.randn(shape, generator=gen, device=device).to(tdt)
               for name in ("q", "k", "v")}
    tensors["o"] = torch.empty(shape, device=device, dtype=tdt)
    tensors["lse"] = torch.empty(shape[:3], device=device, dtype=torch.float32)
    return tensors


def _launcher(causal: bool):  # type: ignore[no-untyped-def]
    def launch(tensors: dict[str, torch.Tensor], problem: Problem,
               config: Mapping[str, Any]) -> None:
        z, h, s, d = problem["Z"], problem["H"], problem["S"], problem["D"]
        q = tensors["q"]
        grid = (triton.cdiv(s, config["BLOCK_M"]), z * h)
        _attention_fwd[grid](q, tensors["k"], tensors["v"], tensors["o"], tensors["lse"],
                             1.0 / math.sqrt(d), s, D=d, BLOCK_M=config["BLOCK_M"],
                             BLOCK_N=config["BLOCK_N"], CAUSAL=causal,
                             UPCAST=INTERPRETED and q.dtype == torch.bfloat16,
                             num_warps=config["num_warps"], num_stages=config["num_stages"])

    return launch


def _reference(causal: bool):  # type: ignore[no-untyped-def]
    def reference(tensors: dict[str, torch.Tensor], problem: Problem) -> torch.Tensor:
        q, k, v = (tensors[n].float() for n in ("q", "k", "v"))
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return reference


def attention_flops(problem: Problem, causal: bool) -> float:
    z, h, s, d = problem["Z"], problem["H"], problem["S"], problem["D"]
    return 4.0 * z * h * s * s * d * (0.5 if causal else 1.0)


def attention_bytes(problem: Problem, dtype: str) -> float:
    z, h, s, d = problem["Z"], problem["H"], problem["S"], problem["D"]
    return float(DTYPE_BYTES[dtype] * 4 * z * h * s * d + 4 * z * h * s)


def attention_exps(problem: Problem, causal: bool) -> float:
    z, h, s = problem["Z"], problem["H"], problem["S"]
    return z * h * s * s * (0.5 if causal else 1.0)


def head_dim_errors(problem: Mapping[str, Any]) -> list[str]:
    d = problem.get("D")
    if isinstance(d, int) and d not in HEAD_DIMS:
        return [f"head dim D={d} is not supported (choose from {', '.join(map(str, HEAD_DIMS))})"]
    return []


def _attention(causal: bool) -> KernelSpec:
    name = "attention_causal" if causal else "attention"
    return KernelSpec(
        name=name,
        description="flash-attention forward" + (", causal" if causal else "")
        + " over (Z, H, S, D) Q/K/V; writes O and the LSE",
        dims=("Z", "H", "S", "D"),
        dtypes=DTYPES,
        space=attention_space(name),
        make_inputs=make_inputs,
        launch=_launcher(causal),
        reference=_reference(causal),
        output="o",
        flops=lambda p, d: attention_flops(p, causal),
        min_bytes=attention_bytes,
        tolerance=TOLERANCE,
        tensor_elements=lambda p: p["Z"] * p["H"] * p["S"] * p["D"],
        example_problem={"Z": 4, "H": 16, "S": 4096, "D": 128},
        exps=lambda p: attention_exps(p, causal),
        problem_check=head_dim_errors,
    )


ATTENTION = _attention(causal=False)
ATTENTION_CAUSAL = _attention(causal=True)
