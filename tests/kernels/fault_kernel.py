"""A test kernel whose ``mode`` parameter makes the bench process fail in each way it can.

``ok`` runs a real Triton kernel (``y = x + 1``). The faults, in the bench process:

* ``compile_error``: a real Triton frontend error (``tl.arange`` of a non-power-of-two block);
* ``out_of_resources``: Triton's own ``OutOfResources`` exception, raised by the launcher (no GPU
  here whose shared memory could really overflow);
* ``wrong_result``: the real kernel computes ``x + 2``;
* ``exit``: ``os._exit(7)``; ``signal``: ``SIGSEGV`` to itself;
* ``hang_compile``: the first call never returns; ``hang_run``: every call after the first hangs;
* ``slow``: a correct kernel whose first call takes ``SLOW_S`` seconds (a trial to kill mid-way).
"""

from __future__ import annotations

import os
import signal
import time

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

from search_spaces import Categorical
from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from tuner.kernels.spec import KernelSpec

MODES = ("ok", "compile_error", "out_of_resources", "wrong_result", "exit", "signal",
         "hang_compile", "hang_run", "slow")
SLOW_S = 2.0


@triton.jit
def _add(x_ptr, y_ptr, n, BLOCK: tl.constexpr, DELTA: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + DELTA, mask=mask)


_calls: dict[int, int] = {}


def make_inputs(problem, dtype, seed, device):
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(problem["N"], generator=gen, device=device)
    return {"x": x, "y": torch.empty_like(x)}


def launch(tensors, problem, config):
    mode = config["mode"]
    calls = _calls.get(id(tensors["x"]), 0)
    _calls[id(tensors["x"])] = calls + 1
    block, delta = config["BLOCK"], 1.0
    if mode == "compile_error":
        block = 48
    elif mode == "out_of_resources":
        raise OutOfResources(300_000, 232_448, "shared memory")
    elif mode == "wrong_result":
        delta = 2.0
    elif mode == "exit":
        os._exit(7)
    elif mode == "signal":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif mode == "hang_compile" or (mode == "hang_run" and calls > 0):
        time.sleep(3600)
    elif mode == "slow" and calls == 0:
        time.sleep(SLOW_S)
    n = problem["N"]
    _add[(triton.cdiv(n, block),)](tensors["x"], tensors["y"], n, BLOCK=block, DELTA=delta)


def reference(tensors, problem):
    return tensors["x"] + 1.0


def space(modes: tuple[str, ...] = MODES, max_block: int = 64) -> SearchSpace:
    return SearchSpace(name="fault", params=(Categorical("mode", modes),
                                             PowerOfTwo("BLOCK", 16, max_block)))


def spec(modes: tuple[str, ...] = MODES, name: str = "fault",
         max_block: int = 64) -> KernelSpec:
    return KernelSpec(
        name=name, description="y = x + 1, with injectable faults", dims=("N",),
        dtypes=("fp32",), space=space(modes, max_block), make_inputs=make_inputs, launch=launch,
        reference=reference, output="y", flops=lambda p, d: float(p["N"]),
        min_bytes=lambda p, d: 8.0 * p["N"], tolerance={"fp32": 1e-6},
        example_problem={"N": 1000},
    )


FAULT = spec()
# One kernel per fault, each with a space of {ok, that fault} × 3 block sizes (6 configs).
PER_FAULT = {mode: spec(("ok", mode), name=f"fault-{mode}") for mode in MODES if mode != "ok"}
# Every config slow (2 s) or fast, 2 x 7 blocks: trials long enough to kill a worker mid-way.
SLOW = spec(("slow", "ok"), name="slow", max_block=1024)
COMPILE_ERROR = PER_FAULT["compile_error"]
OUT_OF_RESOURCES = PER_FAULT["out_of_resources"]
WRONG_RESULT = PER_FAULT["wrong_result"]
EXIT = PER_FAULT["exit"]
SIGNAL = PER_FAULT["signal"]
HANG_COMPILE = PER_FAULT["hang_compile"]
HANG_RUN = PER_FAULT["hang_run"]
