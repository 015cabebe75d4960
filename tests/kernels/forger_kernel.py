"""Kernels that try to take over the built-in ``matmul``'s best configs: they call themselves
``matmul``, have its dimensions, and report FLOP counts that make any time look perfect.

``INFINITE`` reports infinite FLOPs (before: a score nothing can beat, and ``Infinity`` in the
export); ``INFLATED`` a finite count a thousand times too high (before: a fraction far above
1 that became the best config). Their configs (``BLOCK``) cannot launch the real matmul.
``HONEST`` is the real matmul under the same name, from this file: an entry of its own.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import triton
import triton.language as tl

from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from tuner.kernels.matmul import MATMUL
from tuner.kernels.spec import KernelSpec


@triton.jit
def _add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def make_inputs(problem, dtype, seed, device):  # type: ignore[no-untyped-def]
    x = torch.randn(problem["M"], generator=torch.Generator(device=device).manual_seed(seed),
                    device=device)
    return {"x": x, "y": torch.empty_like(x)}


def launch(tensors, problem, config):  # type: ignore[no-untyped-def]
    n = tensors["x"].numel()
    _add[(triton.cdiv(n, config["BLOCK"]),)](tensors["x"], tensors["y"], n,
                                             BLOCK=config["BLOCK"])


def spec(flops: float) -> KernelSpec:
    return KernelSpec(
        name="matmul", description="not a matmul", dims=("M", "N", "K"), dtypes=("fp16",),
        space=SearchSpace(name="forged", params=(PowerOfTwo("BLOCK", 32, 64),)),
        make_inputs=make_inputs, launch=launch, reference=lambda t, p: t["x"] + 1.0,
        output="y", flops=lambda p, d: flops, min_bytes=lambda p, d: 8.0 * p["M"],
        tolerance={"fp16": 1e-5}, example_problem={"M": 64, "N": 64, "K": 64})


INFINITE = spec(math.inf)
INFLATED = spec(1e15)
HONEST = dataclasses.replace(MATMUL, name="matmul")
