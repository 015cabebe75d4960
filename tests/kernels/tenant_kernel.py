"""Kernels that attack other tenants and the host from inside a bench process.

``y = x + 1`` (a real Triton kernel) after the attack of the config's ``mode``:

* ``escape``: tries to reach a TCP server on ``127.0.0.1:<N>`` (the problem's ``N`` is the
  port) and to write every path listed in ``targets.json`` beside this file (a database file,
  another tenant's Triton cache, the service's code, its ``site-packages``); it fails with
  ``escape: connect=… writes=[…]`` saying what it could do;
* ``fork_escape``: starts a grandchild in a session of its own (``setsid``) that holds the bench
  process's pipes, writes ``/dev/shm/tuner-escape-<marker>`` and sleeps for ever; the trial
  itself is fine;
* ``fork_hog``: the same grandchild touching ``HOG_GIB`` GiB of memory;
* ``patch``: replaces the measuring code of its bench process (every result error 0, every
  time 1000x faster), then runs fine;
* ``wrong``: computes ``x + 2``; ``ok``: attacks nothing.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

from search_spaces import Categorical
from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from tuner.kernels.spec import KernelSpec

HOG_GIB = 1.0
MARKER = "tuner-escape"
GRANDCHILD = """
import os, sys, time
marker = sys.argv[1]
data = None
if sys.argv[2] == "hog":
    data = bytearray(int(float(sys.argv[3]) * 2**30))
    for i in range(0, len(data), 4096):
        data[i] = 1
with open(f"/dev/shm/{marker}", "wb") as f:
    f.write(b"x" * (1 << 20))
time.sleep(3600)
"""


@triton.jit
def _add(x_ptr, y_ptr, n, BLOCK: tl.constexpr, DELTA: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + DELTA, mask=mask)


def escape_report(port: int) -> str:
    """What this process could reach: the server on ``port``, the listed paths."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            connect = "connected"
    except OSError as exc:
        connect = type(exc).__name__
    targets = json.loads((Path(__file__).parent / "targets.json").read_text())
    writes = []
    for path in targets:
        target = Path(path)
        try:
            if target.is_dir():
                (target / "evil.pth").write_text("import os\n")
            else:
                with open(target, "ab") as f:
                    f.write(b"")
            writes.append(path)
        except OSError:
            continue
    return f"escape: connect={connect} writes={json.dumps(writes)}"


def _grandchild(kind: str) -> None:
    marker = f"{MARKER}-{os.getpid()}"
    subprocess.Popen([sys.executable, "-c", GRANDCHILD, marker, kind, str(HOG_GIB)],
                     start_new_session=True)  # keeps our stdout and stderr open
    # Its file is written once its memory is touched: from then on the trial is still running
    # (a loaded machine may take seconds to start it), so the memory cap has something to catch.
    written, deadline = Path(f"/dev/shm/{marker}"), time.monotonic() + 60
    while not written.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if kind == "hog":
        time.sleep(10)  # the cap's whole-tree poll (every half second) kills the trial here


def _patch_measuring_code() -> None:
    import tuner.measure.bench as bench
    import tuner.measure.timing as timing

    bench.relative_error = lambda out, ref: 0.0  # type: ignore[assignment]
    real = timing.summarise

    def fast(samples, *args, **kwargs):  # type: ignore[no-untyped-def]
        return real([s / 1000 for s in samples], *args, **kwargs)

    timing.summarise = fast  # type: ignore[assignment]
    bench.summarise = fast  # type: ignore[attr-defined]


def make_inputs(problem, dtype, seed, device):  # type: ignore[no-untyped-def]
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(64, generator=gen, device=device)
    return {"x": x, "y": torch.empty_like(x)}


def launch(tensors, problem, config):  # type: ignore[no-untyped-def]
    mode, delta = config["mode"], 1.0
    if mode == "escape":
        raise RuntimeError(escape_report(problem["N"]))
    if mode in ("fork_escape", "fork_hog") and "_forked" not in tensors:
        tensors["_forked"] = True
        _grandchild("hog" if mode == "fork_hog" else "sleep")
    if mode == "patch":
        _patch_measuring_code()
    if mode == "wrong":
        delta = 2.0
    n = tensors["x"].numel()
    _add[(triton.cdiv(n, config["BLOCK"]),)](tensors["x"], tensors["y"], n,
                                             BLOCK=config["BLOCK"], DELTA=delta)


def spec(modes: tuple[str, ...], name: str) -> KernelSpec:
    return KernelSpec(
        name=name, description="y = x + 1 after an attack", dims=("N",), dtypes=("fp32",),
        space=SearchSpace(name=name, params=(Categorical("mode", modes),
                                             PowerOfTwo("BLOCK", 64, 64))),
        make_inputs=make_inputs, launch=launch,
        reference=lambda t, p: t["x"] + 1.0, output="y", flops=lambda p, d: 64.0,
        min_bytes=lambda p, d: 512.0, tolerance={"fp32": 1e-6}, example_problem={"N": 1000},
    )


ESCAPE = spec(("escape",), "escape")
FORK_ESCAPE = spec(("fork_escape",), "fork-escape")
FORK_HOG = spec(("fork_hog",), "fork-hog")
PATCH = spec(("patch",), "patch")
WRONG = spec(("wrong",), "wrong")
OK = spec(("ok",), "ok")
