"""A test kernel whose ``mode`` parameter makes the bench process fail in each way it can.

``ok`` runs a real Triton kernel (``y = x + 1``). The faults, in the bench process:

* ``compile_error``: a real Triton frontend error (``tl.arange`` of a non-power-of-two block);
* ``out_of_resources``: Triton's own ``OutOfResources`` exception, raised by the launcher (no GPU
  here whose shared memory could really overflow);
* ``wrong_result``: the real kernel computes ``x + 2``;
* ``exit``: ``os._exit(7)``; ``signal``: ``SIGSEGV`` to itself;
* ``hang_compile``: the first call never returns; ``hang_run``: every call after the first hangs;
* ``slow``: a correct kernel whose first call takes ``SLOW_S`` seconds (a trial to kill mid-way).

Hostile kernels (``HOSTILE``), each its own spec:

* ``spin``: a busy loop that never returns (a bench process to orphan);
* ``probe``: reads ``/proc/<pid>/environ`` of every process of this user, its ancestors first,
  and fails with what it found: ``probe: ancestors=… readable=… leaked=[…]``;
* ``hog``: touches ``HOG_GIB`` GiB of host memory; ``gpu_oom``: CUDA's out-of-memory error;
* ``linger``: a correct kernel whose first call takes ``LINGER_S`` seconds.

Real CUDA faults (``CUDA_FAULTS``, GPU tests only):

* ``cuda_oom``: asks the caching allocator for ``OOM_BYTES`` (more than any GPU has);
* ``illegal_address``: the real kernel stores ``OOB_ELEMENTS`` past its output, a sticky CUDA
  error that leaves the process's CUDA context unusable.
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
BRIEF_S = 0.25
HOSTILE = ("spin", "probe", "hog", "gpu_oom", "linger")
HOG_GIB = 1.5
LINGER_S = 8.0
OOM_BYTES = 1 << 44  # 16 TiB
OOB_ELEMENTS = 1 << 38  # 1 TiB of fp32 past the output
#: What the probe looks for in other processes' environments.
SECRET_MARKERS = ("s3cret-marker",)


def _ancestors() -> list[int]:
    pids: list[int] = []
    pid = os.getppid()
    while pid > 1 and len(pids) < 32:
        pids.append(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def probe_secrets() -> str:
    """Read every same-user process's environment; say what was readable and what leaked."""
    ancestors = _ancestors()
    others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    readable, leaked = 0, []
    for pid in ancestors + [p for p in others if p not in ancestors]:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            continue
        readable += 1
        if any(marker in text for marker in SECRET_MARKERS):
            leaked.append(pid)
    own = [m for m in SECRET_MARKERS if any(m in v or m in k for k, v in os.environ.items())]
    return (f"probe: ancestors={len(ancestors)} readable={readable} leaked={leaked} "
            f"own={own}")


@triton.jit
def _add(x_ptr, y_ptr, n, BLOCK: tl.constexpr, DELTA: tl.constexpr, OFFSET: tl.constexpr = 0):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + OFFSET + offs, tl.load(x_ptr + offs, mask=mask) + DELTA, mask=mask)


#: Calls so far are counted on the input tensor itself: a count keyed by ``id()`` outlives the
#: tensor, and a later trial's fresh tensor at the same address would inherit it (a
#: ``hang_run`` config then hung on its first call, mistaken for a compile hang).
CALLS_ATTR = "_fault_kernel_calls"


def make_inputs(problem, dtype, seed, device):
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(problem["N"], generator=gen, device=device)
    return {"x": x, "y": torch.empty_like(x)}


def launch(tensors, problem, config):
    mode = config["mode"]
    calls = getattr(tensors["x"], CALLS_ATTR, 0)
    setattr(tensors["x"], CALLS_ATTR, calls + 1)
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
    elif mode == "brief" and calls == 0:
        time.sleep(BRIEF_S)
    elif mode == "spin":
        while True:
            pass
    elif mode == "probe":
        raise RuntimeError(probe_secrets())
    elif mode == "hog":
        hog = torch.ones(int(HOG_GIB * 2**30 / 4))
        tensors["_hog"] = hog
    elif mode == "gpu_oom":
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")
    elif mode == "linger" and calls == 0:
        time.sleep(LINGER_S)
    elif mode == "cuda_oom":
        tensors["_big"] = torch.empty(OOM_BYTES, dtype=torch.uint8, device=tensors["x"].device)
    n = problem["N"]
    offset = OOB_ELEMENTS if mode == "illegal_address" else 0
    _add[(triton.cdiv(n, block),)](tensors["x"], tensors["y"], n, BLOCK=block, DELTA=delta,
                                   OFFSET=offset)


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
SPIN = spec(("spin",), name="spin")
PROBE = spec(("probe",), name="probe")
HOG = spec(("hog",), name="hog")
GPU_OOM = spec(("gpu_oom", "ok"), name="gpu-oom")
# Load: 2 x 7 configs, half of them a quarter of a second longer (trials overlap the faults).
LOAD = spec(("brief", "ok"), name="load", max_block=1024)
LINGER = spec(("linger", "ok"), name="linger", max_block=1024)
# Real CUDA faults beside correct configs: 3 modes x 3 blocks (9 configs).
CUDA_FAULTS = spec(("ok", "cuda_oom", "illegal_address"), name="cuda-faults")
# Every one of its 7 configs fails to compile the same way (the repeated-failure stop).
ALWAYS_BROKEN = spec(("compile_error",), name="always-broken", max_block=1024)


def _launch_in_place(tensors, problem, config):  # type: ignore[no-untyped-def]
    """``x += 1`` in place: every call changes the input it reads."""
    n = problem["N"]
    _add[(triton.cdiv(n, config["BLOCK"]),)](tensors["x"], tensors["x"], n,
                                              BLOCK=config["BLOCK"], DELTA=1.0)


IN_PLACE = KernelSpec(
    name="in-place", description="x += 1, in place", dims=("N",), dtypes=("fp32",),
    space=SearchSpace(name="in-place", params=(PowerOfTwo("BLOCK", 16, 64),)),
    make_inputs=lambda p, d, s, dev: {"x": make_inputs(p, d, s, dev)["x"]},
    launch=_launch_in_place, reference=lambda t, p: t["x"] + 1.0, output="x",
    flops=lambda p, d: float(p["N"]), min_bytes=lambda p, d: 8.0 * p["N"],
    tolerance={"fp32": 1e-6}, example_problem={"N": 1000})
