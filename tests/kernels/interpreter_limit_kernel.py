"""A correct kernel the Triton interpreter cannot run: it calls a libdevice function the
interpreter does not implement (for the one-line interpreter-limit message)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from tuner.kernels.spec import KernelSpec


@triton.jit
def _erfcinv(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.5)
    tl.store(y_ptr + offs, libdevice.erfcinv(x), mask=offs < n)


def make_inputs(problem, dtype, seed, device):  # type: ignore[no-untyped-def]
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.rand(problem["N"], generator=gen, device=device) * 1.8 + 0.1
    return {"x": x, "y": torch.empty_like(x)}


def launch(tensors, problem, config):  # type: ignore[no-untyped-def]
    n = problem["N"]
    _erfcinv[(triton.cdiv(n, config["BLOCK"]),)](tensors["x"], tensors["y"], n,
                                                 BLOCK=config["BLOCK"])


def reference(tensors, problem):  # type: ignore[no-untyped-def]
    return torch.special.erfinv(1.0 - tensors["x"])


ERFCINV = KernelSpec(
    name="erfcinv", description="y = erfcinv(x) through libdevice", dims=("N",),
    dtypes=("fp32",), space=SearchSpace(name="erfcinv", params=(PowerOfTwo("BLOCK", 16, 1024),)),
    make_inputs=make_inputs, launch=launch, reference=reference, output="y",
    flops=lambda p, d: float(p["N"]), min_bytes=lambda p, d: 8.0 * p["N"],
    tolerance={"fp32": 1e-5}, example_problem={"N": 1000},
)
