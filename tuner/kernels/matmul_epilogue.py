"""Matmul with a fused epilogue: ``C = act(A @ B + bias) + residual``, by name.

Names are ``matmul`` followed by any of, in this order: ``+bias``, one of ``+relu`` / ``+gelu`` /
``+silu``, ``+residual`` — e.g. ``matmul+bias+gelu+residual`` or ``matmul+silu``. Each name is
a kernel of its own (own best configs), sharing the matmul kernel, space and constraints.

Counts (``docs/PERFORMANCE_FACTS.md`` §4, "Fused GEMM epilogue"): FLOPs =
2·M·N·K plus one FLOP per output element for each epilogue step (bias add, activation, residual
add); minimum bytes = the matmul's plus s·N for the bias and s·M·N for the residual read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from search_spaces import DTYPE_BYTES
from search_spaces.matmul import matmul_space
from tuner.kernels import matmul as mm
from tuner.kernels.matmul_model import predict_ms
from tuner.kernels.names import ACTIVATIONS
from tuner.kernels.names import EPILOGUE_DTYPES
from tuner.kernels.names import parse_epilogue
from tuner.kernels.spec import KernelSpec
from tuner.kernels.spec import Problem

TORCH_ACT: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu, "gelu": F.gelu, "silu": F.silu}
DTYPES = EPILOGUE_DTYPES


def epilogue_flops(problem: Problem, bias: bool, act: str | None, residual: bool) -> float:
    m, n, k = problem["M"], problem["N"], problem["K"]
    return 2.0 * m * n * k + (int(bias) + int(act is not None) + int(residual)) * m * n


def epilogue_bytes(problem: Problem, dtype: str, bias: bool, residual: bool) -> float:
    s = DTYPE_BYTES[dtype]
    m, n = problem["M"], problem["N"]
    return mm.min_bytes(problem, dtype) + s * (n * int(bias) + m * n * int(residual))


def apply_epilogue(acc: torch.Tensor, tensors: Mapping[str, torch.Tensor], bias: bool,
                   act: str | None, residual: bool) -> torch.Tensor:
    """The torch epilogue in fp32 on ``acc`` (the reference)."""
    if bias:
        acc = acc + tensors["bias"].float()
    if act:
        acc = TORCH_ACT[act](acc)
    if residual:
        acc = acc + tensors["residual"].float()
    return acc


@functools.cache
def epilogue_kernel(name: str) -> KernelSpec:
    """The ``KernelSpec`` of a ``matmul+…`` name (raises ``ValueError`` for a malformed one)."""
    parsed = parse_epilogue(name)
    if parsed is None:
        raise ValueError(f"{name!r} is not matmul[+bias][+relu|+gelu|+silu][+residual]")
    bias, act, residual = parsed

    def make_inputs(problem: Problem, dtype: str, seed: int,
                    device: str) -> dict[str, torch.Tensor]:
        tensors = mm.make_inputs(problem, dtype, seed, device)
        gen = torch.Generator(device=device).manual_seed(seed + 1)
        tdt = mm.TORCH_DTYPES[dtype]
        if bias:
            tensors["bias"] = torch.randn((problem["N"],), generator=gen, device=device).to(tdt)
        if residual:
            tensors["residual"] = torch.randn((problem["M"], problem["N"]), generator=gen,
                                              device=device).to(tdt)
        return tensors

    def launch(tensors: dict[str, torch.Tensor], problem: Problem,
               config: Mapping[str, Any]) -> None:
        mm.launch_matmul(tensors, problem, config, bias="bias" if bias else None,
                         act=ACTIVATIONS.get(act or "", 0),
                         residual="residual" if residual else None)

    def reference(tensors: dict[str, torch.Tensor], problem: Problem) -> torch.Tensor:
        return apply_epilogue(mm.reference(tensors, problem), tensors, bias, act, residual)

    steps = ", ".join(s for s in ("bias" if bias else "", act or "",
                                  "residual" if residual else "") if s)
    return KernelSpec(
        name=name,
        description=f"C = A @ B with a fused epilogue ({steps}), fp32 accumulate",
        dims=("M", "N", "K"),
        dtypes=DTYPES,
        space=matmul_space(),
        make_inputs=make_inputs,
        launch=launch,
        reference=reference,
        output="c",
        flops=lambda p, d: epilogue_flops(p, bias, act, residual),
        min_bytes=lambda p, d: epilogue_bytes(p, d, bias, residual),
        tolerance=mm.TOLERANCE,
        tensor_elements=mm.largest_tensor,
        example_problem={"M": 512, "N": 512, "K": 512},
        model=predict_ms,
    )
