"""Your own Triton kernel, tuned by the service: ``y = relu(x + z)`` over N elements.

    tuner tune --kernel examples/add_relu_kernel.py:ADD_RELU --shape N=1048576 --dtype fp16

The module defines the kernel, its launcher and a ``KernelSpec`` (``tuner/kernels/spec.py``
states the contract of every field). It is imported on the workers, with their privileges, from
a folder listed in ``TUNER_KERNEL_ROOTS`` (default: the current directory).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import triton
import triton.language as tl

from search_spaces import Constraint
from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from tuner.kernels import KernelSpec

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


@triton.jit
def add_relu(x_ptr, z_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    z = tl.load(z_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, tl.maximum(x + z, 0.0).to(y_ptr.dtype.element_ty), mask=mask)


def make_inputs(problem: Mapping[str, int], dtype: str, seed: int,
                device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(seed)
    n = problem["N"]
    return {"x": torch.randn(n, generator=gen, device=device).to(DTYPES[dtype]),
            "z": torch.randn(n, generator=gen, device=device).to(DTYPES[dtype]),
            "y": torch.empty(n, device=device, dtype=DTYPES[dtype])}


def launch(t: dict[str, torch.Tensor], problem: Mapping[str, int],
           config: Mapping[str, Any]) -> None:
    n = problem["N"]
    add_relu[(triton.cdiv(n, config["BLOCK"]),)](t["x"], t["z"], t["y"], n,
                                                 BLOCK=config["BLOCK"],
                                                 num_warps=config["num_warps"])


ADD_RELU = KernelSpec(
    name="add_relu",
    description="y = relu(x + z), elementwise",
    dims=("N",),
    dtypes=tuple(DTYPES),
    space=SearchSpace(
        name="add_relu",
        params=(PowerOfTwo("BLOCK", 128, 8192), PowerOfTwo("num_warps", 1, 16)),
        constraints=(Constraint.of("tile_fits_problem", dims=(("BLOCK", "N"),), minimum=128),
                     Constraint.of("row_warps_fit_block", block="BLOCK")),
    ),
    make_inputs=make_inputs,
    launch=launch,
    reference=lambda t, p: torch.relu(t["x"].float() + t["z"].float()),
    output="y",
    flops=lambda p, dtype: 2.0 * p["N"],  # one add, one max per element
    min_bytes=lambda p, dtype: 3.0 * p["N"] * (4 if dtype == "fp32" else 2),
    tolerance={"fp32": 1e-6, "fp16": 1e-3},
    compute_dtype=lambda dtype: "fp32",
    example_problem={"N": 1 << 24},
)
