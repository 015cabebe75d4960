"""Bring your own kernel with no glue: a module with an autotuned Triton kernel, the function
that launches it and a torch reference, named by convention.

    @triton.autotune(configs=[...], key=["n_rows", "n_cols"])   # or @tuner.autotune
    @triton.jit
    def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr): ...

    def softmax(x):                      # the launcher: what users call; returns its output(s)
        y = torch.empty_like(x)
        softmax_kernel[lambda META: (x.shape[0],)](x, y, x.shape[0], x.shape[1])
        return y

    def softmax_inputs(n_rows, n_cols, dtype, device):   # the key's names, dtype, device
        return (torch.randn(n_rows, n_cols, dtype=dtype, device=device),)

    def softmax_reference(x):            # same arguments, the torch answer (same structure)
        return torch.softmax(x.float(), dim=-1)

``tuner tune path.py:softmax --shape n_rows=4096,n_cols=1000`` (or ``path.py:softmax_kernel``,
the kernel, when one launcher of it has both partners) tunes it. The problem's dimensions are
the decorator's ``key``; the stored kernel name is the Triton kernel's (``softmax_kernel``), so
``tuner.autotune`` on the same kernel finds the results by its key. Optional partners:
``NAME_flops(**problem)`` (default 0: memory roofline only), ``NAME_bytes(**problem, dtype)``
(default: the bytes of the inputs and of the reference's outputs, from meta tensors),
``NAME_dtypes`` and ``NAME_tolerance``; ``NAME_kernel`` names the kernel when the launcher
calls several autotuned ones.

While a config is measured the decorator's own machinery is honoured: the kernel runs with the
config's meta-parameters and launch options (and a ``pre_hook`` shared by all its configs),
``prune_configs_by``'s ``early_config_prune`` can reject it (an ``invalid`` trial), and
``reset_to_zero``/``restore_value``/``pre_hook``/``post_hook`` run around every call, as in
Triton's own benchmarking. Every output the launcher returns is checked against the reference.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from search_spaces import DTYPE_BYTES
from tuner.kernels.spec import ConfigRejected
from tuner.kernels.spec import KernelError
from tuner.kernels.spec import KernelSpec
from tuner.kernels.spec import Problem

DEFAULT_DTYPES = ("fp32", "fp16", "bf16")
DEFAULT_TOLERANCE = {"fp32": 1e-4, "fp16": 2e-3, "bf16": 1e-2, "fp8e4m3": 6e-2}
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
                "fp8e4m3": "float8_e4m3fn"}
RESULT = "__result__"


def is_autotuned(obj: object) -> bool:
    """A ``@triton.autotune`` kernel, or a ``tuner.autotune`` one (they look alike)."""
    return all(hasattr(obj, a) for a in ("configs", "fn", "keys", "arg_names")) \
        and not inspect.isclass(obj)


def _is_plain_jit(obj: object) -> bool:
    """A ``@triton.jit`` function (compiled or interpreted) that nothing autotunes."""
    return not is_autotuned(obj) and hasattr(obj, "fn") and hasattr(obj, "arg_names") \
        and not inspect.isclass(obj)


def kernel_name(autotuned: Any) -> str:
    fn = autotuned.fn
    while hasattr(fn, "fn"):
        fn = fn.fn
    return str(getattr(fn, "__name__", "kernel"))


def _launchers_of(module: ModuleType, kernel: str) -> list[str]:
    return sorted(n for n, f in vars(module).items()
                  if inspect.isfunction(f) and kernel in f.__code__.co_names
                  and callable(getattr(module, f"{n}_reference", None))
                  and callable(getattr(module, f"{n}_inputs", None)))


def _kernel_of(module: ModuleType, name: str, launcher: Any) -> Any:
    named = getattr(module, f"{name}_kernel", None)
    if named is not None:
        if not is_autotuned(named):
            raise KernelError(f"{name}_kernel is not a @triton.autotune kernel")
        return named
    used = [v for n, v in vars(module).items()
            if is_autotuned(v) and n in launcher.__code__.co_names]
    home = getattr(launcher, "__globals__", None)
    if not used and isinstance(home, dict) and home is not vars(module):
        # a launcher imported from a library: the kernel it launches lives in its own module
        used = [v for n, v in home.items() if is_autotuned(v) and n in launcher.__code__.co_names]
    if len(used) == 1:
        return used[0]
    if not used:
        scopes = [vars(module)] + ([home] if isinstance(home, dict) else [])
        plain = sorted({n for scope in scopes for n, v in scope.items()
                        if n in launcher.__code__.co_names and _is_plain_jit(v)})
        if plain:
            raise KernelError(
                f"{name} launches {', '.join(plain)}: @triton.jit without @triton.autotune, "
                "so its launcher picks the meta-parameters and nothing here can tune them; "
                f"write a launcher that launches {plain[0]} with the config's meta-parameters "
                "(README, Your own kernel), or decorate it with @triton.autotune")
        if isinstance(home, dict) and home is not vars(module):
            raise KernelError(
                f"{name} comes from {launcher.__module__} and launches no @triton.autotune "
                f"(or @tuner.autotune) kernel that this module or {launcher.__module__} names; "
                f"import the kernel it launches and name it: {name}_kernel = <kernel>")
        raise KernelError(f"{name} launches no @triton.autotune (or @tuner.autotune) kernel "
                          "of its module; decorate the kernel it launches")
    names = ", ".join(sorted(kernel_name(k) for k in used))
    raise KernelError(f"{name} launches several autotuned kernels ({names}); name the one to "
                      f"tune: {name}_kernel = <kernel>")


def spec_from_module(module: ModuleType, path: Path, attr: str) -> KernelSpec:
    """The ``KernelSpec`` of ``path:attr`` by the conventions above; ``KernelError`` saying
    what to add when a partner is missing."""
    obj = getattr(module, attr)
    if is_autotuned(obj):
        found = _launchers_of(module, attr)
        if len(found) != 1:
            what = "no function" if not found else f"several functions ({', '.join(found)})"
            raise KernelError(
                f"{path.name}:{attr} is a kernel and {what} of the module launch it with "
                f"NAME_inputs and NAME_reference partners; give the launcher instead "
                f"({path.name}:NAME)")
        attr = found[0]
    launcher = getattr(module, attr)
    if not callable(launcher):
        raise KernelError(f"{path.name}:{attr} is a {type(launcher).__name__}, not a "
                          "KernelSpec or a function that launches a Triton kernel")
    autotuned = _kernel_of(module, attr, launcher)
    for partner, what in (("reference", "the torch answer, from the same arguments"),
                          ("inputs", "the launcher's arguments for a problem")):
        if not callable(getattr(module, f"{attr}_{partner}", None)):
            args = "same arguments as " + attr if partner == "reference" else \
                ", ".join([*autotuned.keys, "dtype", "device"])
            raise KernelError(f"{path.name} has no {attr}_{partner}: add "
                              f"`def {attr}_{partner}({args})` returning {what}")
    return _build(module, attr, launcher, autotuned, path)


def _build(module: ModuleType, attr: str, launcher: Any, autotuned: Any,
           path: Path) -> KernelSpec:
    from tuner.kernels.byo import autotune_space
    from tuner.kernels.identity import jit_identity

    keys = tuple(str(k) for k in autotuned.keys)
    name = kernel_name(autotuned)
    inputs = getattr(module, f"{attr}_inputs")
    reference = getattr(module, f"{attr}_reference")
    _check_inputs_signature(attr, inputs, keys)
    flops_fn = getattr(module, f"{attr}_flops", None)
    bytes_fn = getattr(module, f"{attr}_bytes", None)
    space = autotune_space(name, autotuned.configs)

    def make_inputs(problem: Problem, dtype: str, seed: int, device: str) -> dict[str, Any]:
        return _inputs(inputs, problem, dtype, seed, device)

    def launch(tensors: dict[str, Any], problem: Problem, config: Mapping[str, Any]) -> None:
        args, kwargs = _call_args(tensors)
        with forced(autotuned, config):
            tensors[RESULT] = launcher(*args, **kwargs)

    def run_reference(tensors: dict[str, Any], problem: Problem) -> Any:
        args, kwargs = _call_args(tensors)
        return reference(*args, **kwargs)

    def flops(problem: Problem, dtype: str) -> float:
        return float(flops_fn(**problem)) if flops_fn is not None else 0.0

    def min_bytes(problem: Problem, dtype: str) -> float:
        if bytes_fn is not None:
            return float(bytes_fn(**problem, dtype=dtype))
        return _meta_bytes(inputs, reference, problem, dtype)

    return KernelSpec(
        name=name, description=f"{attr} launching the autotuned kernel {name} ({path.name})",
        dims=keys, dtypes=tuple(getattr(module, f"{attr}_dtypes", DEFAULT_DTYPES)),
        space=space, make_inputs=make_inputs, launch=launch, reference=run_reference,
        output=RESULT, outputs=_results, flops=flops, min_bytes=min_bytes,
        tolerance={**DEFAULT_TOLERANCE, **getattr(module, f"{attr}_tolerance", {})},
        source_path=str(path), identity=jit_identity(autotuned))


def _check_inputs_signature(attr: str, inputs: Any, keys: tuple[str, ...]) -> None:
    params = inspect.signature(inputs).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    missing = [k for k in (*keys, "dtype", "device") if k not in params]
    if missing:
        raise KernelError(f"{attr}_inputs must take the autotune key's names, dtype and "
                          f"device as keywords; it lacks {', '.join(missing)}")


def _torch_dtype(dtype: str) -> Any:
    import torch

    return getattr(torch, TORCH_DTYPES.get(dtype, dtype))


def _inputs(inputs: Any, problem: Problem, dtype: str, seed: int, device: str) -> dict[str, Any]:
    """The launcher's arguments for ``problem`` as a dict: positional ones under "0", "1", …,
    keyword ones under their names (tensors and plain values alike)."""
    import torch

    torch.manual_seed(seed)
    made = inputs(**problem, dtype=_torch_dtype(dtype), device=device)
    if isinstance(made, Mapping):
        return dict(made)
    if not isinstance(made, tuple | list):
        made = (made,)
    return {str(i): v for i, v in enumerate(made)}


def _call_args(tensors: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    positional = sorted((int(k), v) for k, v in tensors.items() if k.isdigit())
    kwargs = {k: v for k, v in tensors.items() if not k.isdigit() and k != RESULT}
    return [v for _, v in positional], kwargs


def _results(tensors: Mapping[str, Any]) -> list[Any]:
    result = tensors.get(RESULT)
    if result is None:
        raise ValueError("the launcher returned None: it must return its output tensor(s)")
    return list(result) if isinstance(result, tuple | list) else [result]


def _meta_bytes(inputs: Any, reference: Any, problem: Problem, dtype: str) -> float:
    """Bytes of every tensor argument plus every reference output, from meta tensors (no
    memory; real CPU tensors when the inputs cannot be made on ``meta``); the inputs alone
    when the reference cannot run on them."""
    import torch

    try:
        made = inputs(**problem, dtype=_torch_dtype(dtype), device="meta")
    except Exception:
        made = inputs(**problem, dtype=_torch_dtype(dtype), device="cpu")
    args = list(made.values()) if isinstance(made, Mapping) else \
        list(made) if isinstance(made, tuple | list) else [made]
    total = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
    try:
        out = reference(**made) if isinstance(made, Mapping) else reference(*args)
        outs = list(out) if isinstance(out, tuple | list) else [out]
        total += sum(o.numel() * DTYPE_BYTES.get(dtype, o.element_size()) for o in outs
                     if isinstance(o, torch.Tensor))
    except Exception:
        pass
    return float(total)


@contextlib.contextmanager
def forced(autotuned: Any, config: Mapping[str, Any]) -> Iterator[None]:
    """While inside, launches of ``autotuned`` run ``config`` (see the module docstring)."""
    import triton

    from tuner.core.launch import triton_form

    hooks = {id(c.pre_hook): c.pre_hook for c in autotuned.configs}
    form = triton_form(dict(config))
    chosen = triton.Config(**form, pre_hook=next(iter(hooks.values())) if len(hooks) == 1
                           else None)
    prune = getattr(autotuned, "early_config_prune", None)
    saved = autotuned.__dict__.get("run")

    def run(*args: Any, **kwargs: Any) -> Any:
        nargs = dict(zip(autotuned.arg_names, args, strict=False))
        if prune is not None and not prune([chosen], nargs, **kwargs):
            raise ConfigRejected("early_config_prune of the kernel's decorator rejects it")
        full = {**nargs, **kwargs, **chosen.all_kwargs()}
        autotuned.pre_hook(full)
        if chosen.pre_hook is not None:
            chosen.pre_hook(full)
        try:
            return autotuned.fn.run(*args, **kwargs, **chosen.all_kwargs())
        finally:
            autotuned.post_hook(full, exception=None)

    autotuned.run = run
    autotuned.best_config = chosen
    try:
        yield
    finally:
        if saved is None:
            del autotuned.run
        else:
            autotuned.run = saved
