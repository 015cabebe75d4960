"""Kernels captured from a real program (``tuner capture``), tunable in place: the capture file's
format, the problem a launch is, the space around the library's own choice, and the spec.

A capture file (JSON, ``schema`` 1) holds one record per Triton kernel the program launched
(``name``, ``module``, ``file``, ``identity`` = its ``jit:`` source hash) and, per distinct
problem, one ``launch``: the arguments (tensors by shape, dtype and strides, small integer
tensors by value; scalars by value), the meta-parameters the launcher chose (``meta``:
constexpr arguments; ``num_warps``, ``num_stages``), the grid (a tuple as launched, and for a
callable grid ``grid_table``: the grid it gives for each block-size choice of the space), the
tensors the launch wrote (``written``), and the calls and seconds it took.

A launch's **problem** is its shape signature: every tensor argument's sizes (``X_0``, ``X_1``
for ``X``'s two dimensions) and every positive integer scalar argument by name, so the same
signature is computed from a live launch when the tuned config is served (``tuner.patch``).

The **reference** is the same kernel launched with the library's own meta-parameters on the
same inputs; a config is correct when every tensor the library's launch wrote matches. A
config the launcher's own grid does not fit writes the wrong elements (``wrong_result``) and
is never served.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import re
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from search_spaces import Choice
from search_spaces import SearchSpace
from tuner.kernels.convention import TORCH_DTYPES
from tuner.kernels.spec import KernelError

SCHEMA = 1
#: Integer tensors with at most this many elements are kept by value (index, routing, offsets).
KEEP_ELEMENTS = 1 << 16
#: Torch dtype names (``str(tensor.dtype)`` without ``torch.``) → the service's dtype names.
DTYPE_NAMES = {torch_name: name for name, torch_name in TORCH_DTYPES.items()}
#: Meta-parameters tuned around the library's value: sizes of blocks and tiles.
BLOCK_LIKE = re.compile(r"(BLOCK|TILE|CHUNK|SPLIT|GROUP)|_SIZE", re.IGNORECASE)
NUM_WARPS = (1, 2, 4, 8, 16, 32)
NUM_STAGES = (1, 2, 3, 4, 5)
#: Largest block size offered (elements per dimension of a tile).
MAX_BLOCK = 1 << 16


def launch_problem(args: Mapping[str, Any]) -> dict[str, int]:
    """The problem of a launch from its named runtime arguments (constexprs excluded): each
    tensor's sizes as ``<name>_<i>`` and each positive integer scalar by name."""
    problem: dict[str, int] = {}
    for name, value in args.items():
        shape = getattr(value, "shape", None)
        if shape is not None and hasattr(value, "dtype"):
            problem.update({f"{name}_{i}": int(n) for i, n in enumerate(shape) if int(n) > 0})
        elif isinstance(value, int) and not isinstance(value, bool) and value > 0:
            problem[name] = int(value)
    return problem


@dataclass(frozen=True)
class BoundLaunch:
    """A launch ``kernel[grid](*args, **kwargs)`` bound to the kernel's parameters."""

    named: dict[str, Any]  # every parameter with a value (defaults filled in)
    constexprs: frozenset[str]
    runtime: dict[str, Any]  # the non-constexpr arguments, in order
    options: dict[str, Any]  # launch options (num_warps, num_stages, …)

    @property
    def meta(self) -> dict[str, Any]:
        return {k: self.named[k] for k in self.constexprs if k in self.named}


def _is_constexpr(parameter: inspect.Parameter) -> bool:
    import triton.language as tl

    ann = parameter.annotation
    return ann is tl.constexpr or (isinstance(ann, str) and "constexpr" in ann)


@functools.lru_cache(maxsize=4096)
def kernel_parameters(fn: Any) -> tuple[tuple[str, ...], frozenset[str], dict[str, Any]]:
    """(parameter names in order, constexpr names, defaults) of the Python function beneath a
    Triton kernel, computed once per function (``inspect.signature`` costs microseconds)."""
    params = list(inspect.signature(fn).parameters.values())
    return (tuple(p.name for p in params),
            frozenset(p.name for p in params if _is_constexpr(p)),
            {p.name: p.default for p in params if p.default is not inspect.Parameter.empty})


def bind_launch(fn: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> BoundLaunch:
    """Bind a launch's arguments to the parameters of the Python function ``fn`` beneath
    the Triton kernel."""
    names, constexprs, defaults = kernel_parameters(fn)
    named = dict(zip(names, args, strict=False))
    options = {}
    for key, value in kwargs.items():
        if key in defaults or key in names:
            named[key] = value
        else:
            options[key] = value
    for key, value in defaults.items():
        named.setdefault(key, value)
    runtime = {n: named[n] for n in names if n not in constexprs and n in named}
    return BoundLaunch(named, constexprs, runtime, options)


def grid_key(meta: Mapping[str, Any]) -> str:
    """The ``grid_table`` key of a choice of block-like meta-parameters."""
    return json.dumps({k: v for k, v in sorted(meta.items()) if is_block_like(k, v)})


def is_block_like(name: str, value: Any) -> bool:
    """A constexpr the space varies: an integer power of two named like a block or tile."""
    return (isinstance(value, int) and not isinstance(value, bool) and value >= 1
            and value & (value - 1) == 0 and bool(BLOCK_LIKE.search(name)))


def block_choices(value: int) -> tuple[int, ...]:
    """Powers of two from a quarter to four times ``value`` (within 1 … ``MAX_BLOCK``)."""
    return tuple(v for v in (value >> 2, value >> 1, value, value << 1, value << 2)
                 if 1 <= v <= MAX_BLOCK and (v != 0))


def derive_space(kernel: Mapping[str, Any]) -> SearchSpace:
    """The space of a captured kernel: each block-like constexpr around the library's values
    (the union over its launches), ``num_warps`` and ``num_stages``; the library's own choice
    for each launch as a seed, so it is measured first."""
    launches = kernel["launches"]
    names = [k for k, v in launches[0]["meta"].items() if is_block_like(k, v)]
    params: list[Choice] = [
        Choice(name, tuple(sorted({c for launch in launches if is_block_like(
            name, launch["meta"].get(name)) for c in block_choices(launch["meta"][name])})))
        for name in names]
    params.append(Choice("num_warps", NUM_WARPS))
    params.append(Choice("num_stages", NUM_STAGES))
    seeds = []
    for launch in launches:
        own = own_config(launch)
        seed = tuple((p.name, own[p.name]) for p in params if own.get(p.name) in p.values())
        if len(seed) == len(params) and seed not in seeds:
            seeds.append(seed)
    return SearchSpace(name=f"captured:{kernel['name']}", params=tuple(params),
                       seeds=tuple(seeds))


def own_config(launch: Mapping[str, Any]) -> dict[str, Any]:
    """The library's own choice for a launch, as a config of the derived space."""
    config = {k: v for k, v in launch["meta"].items() if is_block_like(k, v)}
    config["num_warps"] = launch.get("num_warps") or 4
    config["num_stages"] = launch.get("num_stages") or 3
    return config


def dtype_of(launch: Mapping[str, Any]) -> str:
    """The service dtype of a launch: its first floating tensor's (``fp32`` when none)."""
    for arg in launch["args"]:
        name = DTYPE_NAMES.get(arg.get("dtype", ""))
        if arg["kind"] == "tensor" and name is not None:
            return name
    return "fp32"


def load_capture(path: str | Path) -> dict[str, Any]:
    """A capture file, checked (``KernelError`` with one line when it is not one)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise KernelError(f"cannot read capture file {path}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or \
            not isinstance(doc.get("kernels"), list):
        raise KernelError(f"{path} is not a capture file (written by tuner capture, schema "
                          f"{SCHEMA})")
    return doc


def find_kernel(doc: Mapping[str, Any], name: str, path: str | Path) -> dict[str, Any]:
    for kernel in doc["kernels"]:
        if kernel["name"] == name:
            return dict(kernel)
    names = ", ".join(k["name"] for k in doc["kernels"]) or "(none)"
    raise KernelError(f"{path} captured no kernel {name!r} (captured: {names})")


def import_kernel(kernel: Mapping[str, Any], roots: Sequence[Path] = ()) -> Any:
    """The live Triton kernel (below any ``@triton.autotune``) of a captured record: its module
    imported by name, or, for a program's own file (``__main__``) or a module not importable
    here, its file, which must lie under ``roots`` (``Settings.kernel_roots``). ``KernelError``
    when it cannot be imported or its source changed since the capture."""
    from tuner.kernels.identity import jit_identity

    module_name, file = kernel["module"], kernel.get("file") or ""
    try:
        try:
            if module_name in ("__main__", ""):
                raise ImportError(module_name)
            module = importlib.import_module(module_name)
        except ImportError:
            module = _module_from_file(_inside(file, roots))
        found: Any = module
        for part in kernel["qualname"].split("."):
            found = getattr(found, part)
    except KernelError:
        raise
    except Exception as exc:  # a library that fails to import: one line
        raise KernelError(f"cannot import captured kernel {kernel['name']} from "
                          f"{module_name or file}: {type(exc).__name__}: {exc}") from None
    try:
        identity = jit_identity(found)
    except ValueError:
        raise KernelError(f"captured kernel {kernel['name']}: {module_name or file}."
                          f"{kernel['qualname']} is not a Triton kernel") from None
    if identity != kernel["identity"]:
        raise KernelError(f"the source of {kernel['name']} changed since it was captured "
                          f"(capture it again)")
    return launchable(found)


def _inside(file: str, roots: Sequence[Path]) -> str:
    path = Path(file).resolve()
    if not any(path.is_relative_to(root.resolve()) for root in roots):
        allowed = ", ".join(str(r) for r in roots) or "(none)"
        raise KernelError(f"captured kernel file {file} is outside the allowed kernel roots "
                          f"({allowed}); set TUNER_KERNEL_ROOTS to allow it")
    return str(path)


def launchable(kernel: Any) -> Any:
    """The ``JITFunction`` (or interpreter's ``InterpretedFunction``) under any
    ``@triton.autotune``/``@triton.heuristics``: what a config is launched on directly."""
    from triton.runtime.jit import JITFunction

    kinds: tuple[type, ...] = (JITFunction,)
    try:
        from triton.runtime.interpreter import InterpretedFunction

        kinds = (*kinds, InterpretedFunction)
    except ImportError:
        pass
    while not isinstance(kernel, kinds) and hasattr(kernel, "fn"):
        kernel = kernel.fn
    return kernel


def _module_from_file(file: str) -> Any:
    import hashlib
    import importlib.util
    import sys

    name = "tuner_captured_" + hashlib.sha256(file.encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise KernelError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
