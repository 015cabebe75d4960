"""Matmul ``C[M, N] = A[M, K] @ B[K, N]``: fp32 / fp16 / bf16 / fp8 (e4m3) inputs, fp32 accumulate.

The Triton kernel is the classic tiled one with grouped ("super-grouping") program ordering and
masks on every edge, so any M, N, K works. FLOPs = 2·M·N·K; minimum bytes = s·(M·K + K·N) +
s_C·M·N, where fp8 inputs write an fp16 C (s_C = 2).

The same kernel carries an optional fp32 epilogue, compiled in only when asked for (constexpr
flags): ``+ bias[n]``, an activation (relu, gelu, silu), ``+ residual[m, n]`` and — when one tile
spans a whole row — a layernorm of the row (``tuner/kernels/matmul_epilogue.py`` and
``tuner/kernels/chain.py`` use them).

``fp32`` computes in IEEE fp32 (``input_precision="ieee"``: FMA units, scored against the
FP32 peak), so fp32 results are exact to fp32 rounding rather than TF32's 10-bit mantissa.

Triton's interpreter stores bf16 as raw 16-bit integers and its ``tl.dot`` multiplies those
bit patterns (triton-lang/triton#11584; the maintainers do not support bf16 arithmetic there and
point to casting to fp32). Under the interpreter the kernel therefore upcasts bf16 tiles to fp32
before the dot; the compiled kernel is unaffected (``UPCAST`` is a compile-time constant).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

from search_spaces import DTYPE_BYTES
from search_spaces.matmul import matmul_space
from tuner.kernels.matmul_model import predict_ms
from tuner.kernels.spec import KernelSpec
from tuner.kernels.spec import Problem

TORCH_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp8e4m3": torch.float8_e4m3fn,
}
#: The output dtype for each input dtype (fp8 inputs give fp16 results).
OUT_DTYPES: dict[str, torch.dtype] = {**TORCH_DTYPES, "fp8e4m3": torch.float16}


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr, res_ptr, lnw_ptr, lnb_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_rm, stride_rn,
    eps,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, UPCAST: tl.constexpr,
    HAS_BIAS: tl.constexpr = False, ACT: tl.constexpr = 0, HAS_RES: tl.constexpr = False,
    LN: tl.constexpr = False,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision="ieee" if a.dtype == tl.float32 else None)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    # Epilogue, in fp32: + bias[n], activation, + residual[m, n], then (LN, when one tile spans
    # the whole row) layernorm over the row with weight and bias.
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    if ACT == 1:  # relu
        acc = tl.maximum(acc, 0.0)
    elif ACT == 2:  # gelu (erf form, as torch's default)
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    elif ACT == 3:  # silu
        acc = acc / (1.0 + tl.exp(-acc))
    if HAS_RES:
        r_ptrs = res_ptr + offs_m[:, None] * stride_rm + offs_n[None, :] * stride_rn
        acc += tl.load(r_ptrs, mask=mask, other=0.0).to(tl.float32)
    if LN:
        row = tl.where(mask, acc, 0.0)
        mean = tl.sum(row, 1) / N
        diff = tl.where(mask, acc - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, 1) / N + eps)
        w = tl.load(lnw_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
        b = tl.load(lnb_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
        acc = diff * rstd[:, None] * w[None, :] + b[None, :]
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=mask)


INTERPRETED = isinstance(_matmul_kernel, InterpretedFunction)
#: Input dtypes the interpreter cannot multiply as stored (see the module docstring).
UPCAST_DTYPES = (torch.bfloat16, torch.float8_e4m3fn)


def make_inputs(problem: Problem, dtype: str, seed: int, device: str) -> dict[str, torch.Tensor]:
    """Seeded standard-normal A and B, and an uninitialised C, all on ``device``."""
    gen = torch.Generator(device=device).manual_seed(seed)
    m, n, k = problem["M"], problem["N"], problem["K"]
    tdt = TORCH_DTYPES[dtype]
    a = torch.randn((m, k), generator=gen, device=device, dtype=torch.float32).to(tdt)
    b = torch.randn((k, n), generator=gen, device=device, dtype=torch.float32).to(tdt)
    c = torch.empty((m, n), device=device, dtype=OUT_DTYPES[dtype])
    return {"a": a, "b": b, "c": c}


def launch_matmul(tensors: dict[str, torch.Tensor], problem: Problem,
                  config: Mapping[str, Any], *, out: str = "c", bias: str | None = None,
                  act: int = 0, residual: str | None = None,
                  layernorm: tuple[str, str] | None = None, eps: float = 1e-5) -> None:
    """Launch the kernel with an optional epilogue, reading the named tensors.

    ``layernorm`` (weight, bias names) needs one tile per row: BLOCK_N is then the padded N and
    ``config["BLOCK_N"]`` is ignored.
    """
    a, b, c = tensors["a"], tensors["b"], tensors[out]
    m, n, k = problem["M"], problem["N"], problem["K"]
    block_n = max(16, triton.next_power_of_2(n)) if layernorm else config["BLOCK_N"]
    res = tensors[residual] if residual else c
    lnw, lnb = (tensors[layernorm[0]], tensors[layernorm[1]]) if layernorm else (c, c)
    grid = (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, block_n),)
    _matmul_kernel[grid](
        a, b, c, tensors[bias] if bias else c, res, lnw, lnb, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        res.stride(0), res.stride(1), eps,
        BLOCK_M=config["BLOCK_M"], BLOCK_N=block_n, BLOCK_K=config["BLOCK_K"],
        GROUP_M=config.get("GROUP_M", 1),
        UPCAST=INTERPRETED and a.dtype in UPCAST_DTYPES,
        HAS_BIAS=bias is not None, ACT=act, HAS_RES=residual is not None,
        LN=layernorm is not None,
        num_warps=config["num_warps"], num_stages=config["num_stages"],
    )


def launch(tensors: dict[str, torch.Tensor], problem: Problem, config: Mapping[str, Any]) -> None:
    launch_matmul(tensors, problem, config)


def reference(tensors: dict[str, torch.Tensor], problem: Problem) -> torch.Tensor:
    """fp32 matmul of the same (already rounded) inputs."""
    return torch.matmul(tensors["a"].float(), tensors["b"].float())


def flops(problem: Problem, dtype: str) -> float:
    return 2.0 * problem["M"] * problem["N"] * problem["K"]


def out_bytes(dtype: str) -> int:
    """Bytes per output element (fp8 inputs write fp16)."""
    return 2 if dtype.startswith("fp8") else DTYPE_BYTES[dtype]


def min_bytes(problem: Problem, dtype: str) -> float:
    m, n, k = problem["M"], problem["N"], problem["K"]
    return float(DTYPE_BYTES[dtype] * (m * k + k * n) + out_bytes(dtype) * m * n)


def largest_tensor(problem: Problem) -> int:
    m, n, k = problem["M"], problem["N"], problem["K"]
    return max(m * k, k * n, m * n)


def compute_dtype(dtype: str) -> str:
    return dtype


TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2, "fp8e4m3": 2e-3}

MATMUL = KernelSpec(
    name="matmul",
    description="C = A @ B with fp32 accumulation, grouped tile ordering, masked edges",
    dims=("M", "N", "K"),
    dtypes=("fp32", "fp16", "bf16", "fp8e4m3"),
    space=matmul_space(),
    make_inputs=make_inputs,
    launch=launch,
    reference=reference,
    output="c",
    flops=flops,
    min_bytes=min_bytes,
    tolerance=TOLERANCE,
    compute_dtype=compute_dtype,
    tensor_elements=largest_tensor,
    example_problem={"M": 512, "N": 512, "K": 512},
    model=predict_ms,
)
