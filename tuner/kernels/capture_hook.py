"""What ``tuner capture`` installs in the captured program: every Triton kernel launch is
recorded (kernel, arguments, the meta-parameters its launcher chose, grid, time), and at exit
this process's part of the capture file is written into the capture folder.

Installed by the ``sitecustomize`` module the capture puts first on ``PYTHONPATH``
(``TUNER_CAPTURE_DIR`` names the folder), so it works whatever starts Python. It wraps ``run``
of Triton's ``JITFunction`` (and of the interpreter's ``InterpretedFunction``): the launch path
of ``kernel[grid](...)``, of ``@triton.autotune`` (whose own benchmarking launches are not
recorded, only the launch it chose) and of ``@triton.heuristics``. Timing waits for the device
before and after each launch (``torch.cuda.synchronize``), so a captured run is slower than a
plain one; seconds are wall-clock.
"""

from __future__ import annotations

import atexit
import inspect
import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.kernels.captured import KEEP_ELEMENTS
from tuner.kernels.captured import SCHEMA
from tuner.kernels.captured import bind_launch
from tuner.kernels.captured import block_choices
from tuner.kernels.captured import grid_key
from tuner.kernels.captured import is_block_like
from tuner.kernels.captured import launch_problem

#: Most grid evaluations recorded per launch for a callable grid.
MAX_GRID_TABLE = 512

_local = threading.local()
_kernels: dict[int, dict[str, Any]] = {}
_started = time.perf_counter()


def _json_value(value: Any) -> Any:
    """A meta-parameter as JSON: a Triton dtype as ``{"triton_dtype": "fp32"}`` (rebuilt by
    ``tuner.kernels.captured_launch``), other values as they are or as text."""
    import triton.language as tl

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tl.dtype):
        return {"triton_dtype": value.name}
    return str(value)


def _describe(name: str, value: Any) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        arg: dict[str, Any] = {"name": name, "kind": "tensor", "shape": list(value.shape),
                               "stride": list(value.stride()),
                               "dtype": str(value.dtype).removeprefix("torch."),
                               "device": value.device.type}
        if not value.dtype.is_floating_point and value.numel() <= KEEP_ELEMENTS:
            arg["values"] = value.detach().cpu().reshape(-1).tolist()
        return arg
    return {"name": name, "kind": "scalar", "value": _json_value(value)}


def _sync(tensors: list[Any]) -> None:
    if any(t.device.type == "cuda" for t in tensors):
        import torch

        torch.cuda.synchronize()


def _grid_table(grid: Callable[..., Any], named: dict[str, Any]) -> dict[str, list[int]]:
    """The grid a callable grid gives for each block-size choice of the derived space."""
    blocks = {k: block_choices(v) for k, v in named.items() if is_block_like(k, v)}
    table: dict[str, list[int]] = {}
    combos = itertools.product(*blocks.values())
    for values in itertools.islice(combos, MAX_GRID_TABLE):
        meta = dict(zip(blocks, values, strict=True))
        try:
            table[grid_key(meta)] = [int(g) for g in grid({**named, **meta})]
        except Exception:  # a grid that needs what this choice lacks: not recorded
            continue
    return table


def _record_of(kernel: Any) -> dict[str, Any]:
    from tuner.kernels.identity import jit_identity

    record = _kernels.get(id(kernel))
    if record is None:
        fn = kernel.fn
        try:
            identity = jit_identity(kernel)
        except Exception:
            identity = "jit:unknown"
        record = {"name": fn.__name__, "qualname": fn.__qualname__, "module": fn.__module__,
                  "file": inspect.getsourcefile(fn) or "", "identity": identity,
                  "launches": {}, "_kernel": kernel}
        _kernels[id(kernel)] = record
    return record


def _launch(kernel: Any, orig: Callable[..., Any], args: tuple[Any, ...], grid: Any,
            kwargs: dict[str, Any]) -> Any:
    import torch

    bound = bind_launch(kernel.fn, args, kwargs)
    named, runtime, options = bound.named, bound.runtime, bound.options
    meta = {k: _json_value(v) for k, v in bound.meta.items()}
    problem = launch_problem(runtime)
    record = _record_of(kernel)
    key = json.dumps(problem, sort_keys=True)
    tensors = [v for v in runtime.values() if isinstance(v, torch.Tensor)]
    launch = record["launches"].get(key)
    before = None
    if launch is None:
        launch = {"problem": problem, "args": [_describe(k, v) for k, v in runtime.items()],
                  "meta": meta, "num_warps": options.get("num_warps"),
                  "num_stages": options.get("num_stages"), "calls": 0, "seconds": 0.0,
                  "bytes": sum(t.numel() * t.element_size()
                               for t in {t.data_ptr(): t for t in tensors}.values())}
        if callable(grid):
            launch["grid"] = [int(g) for g in grid(named)]
            launch["grid_table"] = _grid_table(grid, named)
        else:
            launch["grid"] = [int(g) for g in (grid if isinstance(grid, tuple | list)
                                               else (grid,))]
        record["launches"][key] = launch
        before = {k: v.clone() for k, v in runtime.items() if isinstance(v, torch.Tensor)}
    _sync(tensors)
    start = time.perf_counter()
    result = orig(kernel, *args, grid=grid, warmup=False, **kwargs)
    _sync(tensors)
    launch["seconds"] += time.perf_counter() - start
    launch["calls"] += 1
    if before is not None:
        launch["written"] = [k for k, v in before.items()
                             if not torch.equal(v, runtime[k])
                             and not (v.is_floating_point() and torch.allclose(
                                 v, runtime[k], rtol=0, atol=0, equal_nan=True))]
    return result


def _wrap(cls: type) -> None:
    orig = getattr(cls, "run")  # noqa: B009 (mypy: type has no run)
    if getattr(orig, "_tuner_capture", False):
        return

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if warmup or getattr(_local, "busy", False):
            return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
        _local.busy = True
        try:
            return _launch(self, orig, args, grid, kwargs)
        finally:
            _local.busy = False

    run._tuner_capture = True  # type: ignore[attr-defined]
    setattr(cls, "run", run)  # noqa: B010


def _quiet_autotuner_benchmarks() -> None:
    """Launches ``@triton.autotune`` makes while it benchmarks its configs are not recorded."""
    from triton.runtime.autotuner import Autotuner

    bench = Autotuner._bench
    if getattr(bench, "_tuner_capture", False):
        return

    def quiet(self: Any, *args: Any, **kwargs: Any) -> Any:
        was = getattr(_local, "busy", False)
        _local.busy = True
        try:
            return bench(self, *args, **kwargs)
        finally:
            _local.busy = was

    quiet._tuner_capture = True  # type: ignore[attr-defined]
    Autotuner._bench = quiet  # type: ignore[method-assign]


def install(folder: str | Path) -> None:
    """Record every launch of this process; write ``<folder>/part-<pid>.json`` at exit."""
    from triton.runtime.jit import JITFunction

    _wrap(JITFunction)
    try:
        from triton.runtime.interpreter import InterpretedFunction

        _wrap(InterpretedFunction)
    except ImportError:
        pass
    _quiet_autotuner_benchmarks()
    if os.environ.get("TRITON_INTERPRET") == "1":  # libdevice math the interpreter lacks
        from tuner.kernels.interpreter_math import install as install_math

        install_math()
    atexit.register(write_part, Path(folder))


def write_part(folder: Path) -> None:
    """This process's launches as one part of the capture (nothing when it launched none)."""
    if not _kernels:
        return
    device = "cpu"
    kernels = []
    for record in _kernels.values():
        launches = sorted(record["launches"].values(), key=lambda x: -x["seconds"])
        if any(a.get("device") == "cuda" for launch in launches for a in launch["args"]):
            device = "cuda"
        kernels.append({k: v for k, v in record.items() if not k.startswith("_")}
                       | {"launches": launches})
    doc = {"schema": SCHEMA, "pid": os.getpid(), "device": device,
           "interpreted": os.environ.get("TRITON_INTERPRET") == "1",
           "program_seconds": time.perf_counter() - _started, "kernels": kernels}
    if device == "cuda":
        import torch

        doc["device_name"] = torch.cuda.get_device_name()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"part-{os.getpid()}.json").write_text(json.dumps(doc, indent=1))
