"""Fused MoE: a top-k routed grouped GEMM with the meta-parameters of vLLM's and SGLang's
fused-MoE kernel (``BLOCK_SIZE_M/N/K``, ``GROUP_SIZE_M``, ``num_warps``, ``num_stages``).

Each of ``M`` tokens is routed to ``topk`` of ``E`` experts; the output holds, for every
(token, slot), the token's hidden vector (``K``) times its expert's weight (``N × K``):
``C[t, j] = A[t] @ B[ids[t, j]]ᵀ`` — the first GEMM of an MoE layer. Tokens are sorted by
expert and padded to a multiple of ``BLOCK_SIZE_M`` (the libraries' ``moe_align_block_size``,
here in torch, prepared with the inputs for every block size so it is not timed); each program
computes one ``BLOCK_SIZE_M × BLOCK_SIZE_N`` tile of one expert's rows, in grouped order.
Its problems are one per batch size ``M``, as the libraries' config files are
(``tuner export --format vllm-moe``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

from search_spaces import DTYPE_BYTES
from search_spaces.moe import GRID
from search_spaces.moe import moe_space
from tuner.kernels.spec import KernelSpec
from tuner.kernels.spec import Problem

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@triton.jit
def _fused_moe_kernel(a_ptr, b_ptr, c_ptr, sorted_ids_ptr, expert_ids_ptr, padded_ptr,
                      N, K, EM, valid_tokens,
                      stride_am, stride_ak, stride_be, stride_bn, stride_bk,
                      stride_cm, stride_cn,
                      TOPK: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
                      BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                      GROUP_SIZE_M: tl.constexpr, UPCAST: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(EM, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    in_group = GROUP_SIZE_M * num_pid_n
    first_m = (pid // in_group) * GROUP_SIZE_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    if pid_m * BLOCK_SIZE_M < tl.load(padded_ptr):
        offs_id = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        token = tl.load(sorted_ids_ptr + offs_id)
        token_mask = token < valid_tokens
        offs_n = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
        offs_k = tl.arange(0, BLOCK_SIZE_K)
        expert = tl.load(expert_ids_ptr + pid_m)
        a_ptrs = a_ptr + (token[:, None] // TOPK) * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + expert * stride_be + offs_k[:, None] * stride_bk \
            + offs_n[None, :] * stride_bn
        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            left = K - k * BLOCK_SIZE_K
            a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < left), other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < left, other=0.0)
            if UPCAST:  # the interpreter's numpy has no bf16 matmul
                acc += tl.dot(a.to(tl.float32), b.to(tl.float32))
            else:
                acc += tl.dot(a, b)
            a_ptrs += BLOCK_SIZE_K * stride_ak
            b_ptrs += BLOCK_SIZE_K * stride_bk
        offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_ptrs = c_ptr + token[:, None] * stride_cm + offs_cn[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
                 mask=token_mask[:, None] & (offs_cn[None, :] < N))


INTERPRETED = isinstance(_fused_moe_kernel, InterpretedFunction)


def align_block_size(ids: torch.Tensor, block_m: int, experts: int
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token slots sorted by expert, each expert's run padded to a multiple of ``block_m``
    with the invalid slot ``ids.numel()``; the expert of each block; the padded length."""
    flat = ids.flatten()
    invalid = flat.numel()
    slots, owners = [], []
    for expert in range(experts):
        mine = (flat == expert).nonzero().flatten()
        if mine.numel() == 0:
            continue
        pad = -mine.numel() % block_m
        slots.append(torch.cat([mine, mine.new_full((pad,), invalid)]))
        owners.append(torch.full(((mine.numel() + pad) // block_m,), expert))
    sorted_ids = torch.cat(slots).to(torch.int32)
    return (sorted_ids.to(ids.device), torch.cat(owners).to(torch.int32).to(ids.device),
            torch.tensor([sorted_ids.numel()], dtype=torch.int32, device=ids.device))


def make_inputs(problem: Problem, dtype: str, seed: int, device: str) -> dict[str, Any]:
    """Seeded tokens and expert weights, a seeded routing (distinct experts per token), the
    aligned slots for every block size of the space, and an uninitialised output."""
    gen = torch.Generator().manual_seed(seed)
    m, e, n, k, topk = (problem[d] for d in ("M", "E", "N", "K", "topk"))
    tdt = TORCH_DTYPES[dtype]
    a = (torch.randn(m, k, generator=gen) / k ** 0.25).to(tdt).to(device)
    b = (torch.randn(e, n, k, generator=gen) / k ** 0.25).to(tdt).to(device)
    ids = torch.stack([torch.randperm(e, generator=gen)[:topk] for _ in range(m)]).to(device)
    tensors: dict[str, Any] = {"a": a, "b": b, "ids": ids,
                               "c": torch.empty(m, topk, n, dtype=tdt, device=device)}
    for block_m in GRID["BLOCK_SIZE_M"]:
        aligned = align_block_size(ids, block_m, e)
        tensors.update(zip((f"sorted_{block_m}", f"experts_{block_m}", f"padded_{block_m}"),
                           aligned, strict=True))
    return tensors


def launch(tensors: dict[str, Any], problem: Problem, config: Mapping[str, Any]) -> None:
    a, b, c = tensors["a"], tensors["b"], tensors["c"]
    n, k, topk = problem["N"], problem["K"], problem["topk"]
    block_m = config["BLOCK_SIZE_M"]
    sorted_ids, experts, padded = (tensors[f"{name}_{block_m}"]
                                   for name in ("sorted", "experts", "padded"))
    em = sorted_ids.numel()
    grid = (triton.cdiv(em, config["BLOCK_SIZE_M"]) * triton.cdiv(n, config["BLOCK_SIZE_N"]),)
    _fused_moe_kernel[grid](
        a, b, c, sorted_ids, experts, padded, n, k, em, tensors["ids"].numel(),
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), b.stride(2),
        c.stride(1), c.stride(2),
        TOPK=topk, BLOCK_SIZE_M=config["BLOCK_SIZE_M"], BLOCK_SIZE_N=config["BLOCK_SIZE_N"],
        BLOCK_SIZE_K=config["BLOCK_SIZE_K"], GROUP_SIZE_M=config["GROUP_SIZE_M"],
        UPCAST=INTERPRETED and a.dtype == torch.bfloat16,
        num_warps=config["num_warps"], num_stages=config["num_stages"])


def reference(tensors: dict[str, Any], problem: Problem) -> torch.Tensor:
    """fp32: every (token, slot) times its expert's weight."""
    a, b, ids = tensors["a"].float(), tensors["b"].float(), tensors["ids"]
    return torch.einsum("mk,mjnk->mjn", a, b[ids])


def flops(problem: Problem, dtype: str) -> float:
    return 2.0 * problem["M"] * problem["topk"] * problem["N"] * problem["K"]


def min_bytes(problem: Problem, dtype: str) -> float:
    """Tokens read once, the weights of the experts used (at most ``M·topk``), output once."""
    m, e, n, k, topk = (problem[d] for d in ("M", "E", "N", "K", "topk"))
    used = min(e, m * topk)
    return float(DTYPE_BYTES[dtype] * (m * k + used * n * k + m * topk * n))


def largest_tensor(problem: Problem) -> int:
    m, e, n, k, topk = (problem[d] for d in ("M", "E", "N", "K", "topk"))
    return max(m * k, e * n * k, m * topk * n)


def problem_check(problem: Mapping[str, Any]) -> list[str]:
    return [] if problem["topk"] <= problem["E"] else \
        [f"topk={problem['topk']} is more than the E={problem['E']} experts"]


FUSED_MOE = KernelSpec(
    name="fused_moe",
    description="top-k routed grouped GEMM (an MoE layer's first GEMM), vLLM/SGLang "
                "meta-parameters; one problem per batch size M",
    dims=("M", "E", "N", "K", "topk"),
    dtypes=("fp16", "bf16", "fp32"),
    space=moe_space(),
    make_inputs=make_inputs,
    launch=launch,
    reference=reference,
    output="c",
    flops=flops,
    min_bytes=min_bytes,
    tolerance={"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2},
    tensor_elements=largest_tensor,
    example_problem={"M": 16, "E": 8, "N": 128, "K": 128, "topk": 2},
    problem_check=problem_check,
)
