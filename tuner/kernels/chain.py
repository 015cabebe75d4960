"""The fusion chain ``linear+bias+gelu+residual+layernorm``: ``y = LN(gelu(x·W + b) + r)``.

The chain is one tunable kernel whose ``grouping`` parameter chooses how it is split into
Triton kernels (``search_spaces/chain.py``): ``unfused`` (5 kernels), ``separate`` (matmul,
one elementwise kernel, layernorm), ``epilogue`` (matmul with the bias/gelu/residual epilogue,
then layernorm) or ``full`` (one kernel; its tile spans the row, so the layernorm runs in the
matmul's epilogue). Intermediates live in scratch buffers allocated with the inputs.

Its roofline is the ideal fully-fused one, so an unfused grouping's score shows what fusion
would save: FLOPs = 2·M·N·K + 10·M·N (bias 1, gelu 1, residual 1, layernorm 7 per element);
minimum bytes = s·(M·K + K·N + M·N [residual] + M·N [y] + 3·N [bias, LN weight and bias]).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from search_spaces import DTYPE_BYTES
from search_spaces.chain import chain_space
from tuner.kernels import matmul as mm
from tuner.kernels.rowwise import EPS
from tuner.kernels.rowwise import launch_norm
from tuner.kernels.spec import KernelSpec
from tuner.kernels.spec import Problem

NAME = "linear+bias+gelu+residual+layernorm"
GELU = 2  # the matmul kernel's ACT code


@triton.jit
def _elementwise_kernel(h_ptr, bias_ptr, res_ptr, out_ptr, total, N, BLOCK: tl.constexpr,
                        HAS_BIAS: tl.constexpr, GELU: tl.constexpr, HAS_RES: tl.constexpr):
    """out = [gelu](h [+ bias[col]]) [+ res], over M·N contiguous elements."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    x = tl.load(h_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        x += tl.load(bias_ptr + offs % N, mask=mask, other=0.0).to(tl.float32)
    if GELU:
        x = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    if HAS_RES:
        x += tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=mask)


def make_inputs(problem: Problem, dtype: str, seed: int, device: str) -> dict[str, torch.Tensor]:
    """x (as ``a``, M×K), W (as ``b``, K×N), bias, residual, LN weight/bias, y, scratch."""
    tensors = mm.make_inputs(problem, dtype, seed, device)
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    m, n = problem["M"], problem["N"]
    tdt = mm.TORCH_DTYPES[dtype]
    tensors["bias"] = torch.randn((n,), generator=gen, device=device).to(tdt)
    tensors["residual"] = torch.randn((m, n), generator=gen, device=device).to(tdt)
    tensors["ln_w"] = (1 + 0.1 * torch.randn((n,), generator=gen, device=device)).to(tdt)
    tensors["ln_b"] = (0.1 * torch.randn((n,), generator=gen, device=device)).to(tdt)
    tensors["y"] = torch.empty((m, n), device=device, dtype=tdt)
    tensors["h"] = torch.empty((m, n), device=device, dtype=tdt)
    tensors["h2"] = torch.empty((m, n), device=device, dtype=tdt)
    return tensors


def _elementwise(tensors: dict[str, torch.Tensor], problem: Problem, config: Mapping[str, Any],
                 src: str, dst: str, bias: bool = False, gelu: bool = False,
                 residual: bool = False) -> None:
    total = problem["M"] * problem["N"]
    h = tensors[src]
    _elementwise_kernel[(triton.cdiv(total, config["EW_BLOCK"]),)](
        h, tensors["bias"], tensors["residual"], tensors[dst], total, problem["N"],
        BLOCK=config["EW_BLOCK"], HAS_BIAS=bias, GELU=gelu, HAS_RES=residual,
        num_warps=config["EW_WARPS"])


def launch(tensors: dict[str, torch.Tensor], problem: Problem, config: Mapping[str, Any]) -> None:
    """Run the chain as ``config["grouping"]`` splits it."""
    grouping = config["grouping"]
    ln = {"BLOCK_N": config.get("LN_BLOCK_N"), "num_warps": config.get("LN_WARPS")}
    if grouping == "full":
        mm.launch_matmul(tensors, problem, config, out="y", bias="bias", act=GELU,
                         residual="residual", layernorm=("ln_w", "ln_b"), eps=EPS)
    elif grouping == "epilogue":
        mm.launch_matmul(tensors, problem, config, out="h", bias="bias", act=GELU,
                         residual="residual")
        launch_norm(tensors, problem, ln, x="h", w="ln_w", b="ln_b")
    elif grouping == "separate":
        mm.launch_matmul(tensors, problem, config, out="h")
        _elementwise(tensors, problem, config, "h", "h2", bias=True, gelu=True, residual=True)
        launch_norm(tensors, problem, ln, x="h2", w="ln_w", b="ln_b")
    elif grouping == "unfused":
        mm.launch_matmul(tensors, problem, config, out="h")
        _elementwise(tensors, problem, config, "h", "h2", bias=True)
        _elementwise(tensors, problem, config, "h2", "h", gelu=True)
        _elementwise(tensors, problem, config, "h", "h2", residual=True)
        launch_norm(tensors, problem, ln, x="h2", w="ln_w", b="ln_b")
    else:
        raise ValueError(f"unknown grouping {grouping!r}")


def reference(tensors: dict[str, torch.Tensor], problem: Problem) -> torch.Tensor:
    h = F.gelu(mm.reference(tensors, problem) + tensors["bias"].float())
    h = h + tensors["residual"].float()
    return F.layer_norm(h, (problem["N"],), tensors["ln_w"].float(), tensors["ln_b"].float(),
                        EPS)


def chain_flops(problem: Problem, dtype: str) -> float:
    m, n, k = problem["M"], problem["N"], problem["K"]
    return 2.0 * m * n * k + 10.0 * m * n


def chain_bytes(problem: Problem, dtype: str) -> float:
    m, n, k = problem["M"], problem["N"], problem["K"]
    return float(DTYPE_BYTES[dtype] * (m * k + k * n + 2 * m * n + 3 * n))


CHAIN = KernelSpec(
    name=NAME,
    description="y = layernorm(gelu(x·W + b) + residual), split into kernels by 'grouping'",
    dims=("M", "N", "K"),
    dtypes=("fp32", "fp16", "bf16"),
    space=chain_space(NAME),
    make_inputs=make_inputs,
    launch=launch,
    reference=reference,
    output="y",
    flops=chain_flops,
    min_bytes=chain_bytes,
    tolerance={"fp32": 1e-5, "fp16": 3e-3, "bf16": 1e-2},
    tensor_elements=mm.largest_tensor,
    example_problem={"M": 4096, "N": 1024, "K": 4096},
)
