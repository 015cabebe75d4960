"""``tuner.patch()``: the library's own launches pick up the configs tuned in place
(``tuner tune --captured``), with no change to the library.

Every ``kernel[grid](...)`` launch of a Triton kernel passes through a wrapper of Triton's
``JITFunction.run`` (and the interpreter's). For a kernel the patch covers (``modules``: module
name prefixes, ``kernels``: function names; default all), the launch's problem (its shape
signature, ``tuner.kernels.captured.launch_problem``) and dtype are looked up with
``best_config`` for this device kind and the kernel's own source identity; only an **exact**
answer is used — a config verified on this very problem — and it replaces the block-size
meta-parameters and ``num_warps``/``num_stages`` the launcher chose. The grid is the
launcher's: a tuple grid as given (the tuning ran with it), a callable grid evaluated by Triton
with the tuned meta-parameters. Anything else, or any error, launches exactly what the library
chose. ``TUNER_PATCH=off`` turns it off. Answers are cached per (kernel, problem, dtype).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

from tuner.core.launch import LAUNCH_OPTIONS
from tuner.kernels.captured import DTYPE_NAMES
from tuner.kernels.captured import bind_launch
from tuner.kernels.captured import launch_problem

log = logging.getLogger("tuner.patch")

_lock = threading.Lock()
_originals: dict[type, Callable[..., Any]] = {}
_filters: dict[str, tuple[str, ...] | None] = {"modules": None, "kernels": None}
_source: list[str | None] = [None]
_answers: dict[tuple[Any, ...], dict[str, Any] | None] = {}
_identities: dict[int, str | None] = {}


def _dtype(runtime: dict[str, Any]) -> str:
    for value in runtime.values():
        dtype = getattr(value, "dtype", None)
        name = DTYPE_NAMES.get(str(dtype).removeprefix("torch."))
        if name is not None:
            return name
    return "fp32"


def _covered(fn: Any) -> bool:
    modules, kernels = _filters["modules"], _filters["kernels"]
    if kernels is not None and fn.__name__ not in kernels:
        return False
    return modules is None or any(fn.__module__ == m or fn.__module__.startswith(m + ".")
                                  for m in modules)


def _identity(kernel: Any) -> str | None:
    if id(kernel) not in _identities:
        from tuner.kernels.identity import jit_identity

        try:
            _identities[id(kernel)] = jit_identity(kernel)
        except ValueError:
            _identities[id(kernel)] = None
    return _identities[id(kernel)]


def tuned_meta(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The launch's arguments with the tuned config in place, or None (launch as given)."""
    fn = kernel.fn
    if not _covered(fn):
        return None
    bound = bind_launch(fn, args, kwargs)
    problem = launch_problem(bound.runtime)
    dtype = _dtype(bound.runtime)
    key = (id(kernel), tuple(sorted(problem.items())), dtype)
    if key not in _answers:
        from tuner.serving.lookup import best_config

        identity = _identity(kernel)
        answer = None if identity is None else best_config(
            fn.__name__, problem, dtype, source=_source[0], identity=identity)
        _answers[key] = dict(answer) if answer is not None and answer.tier == "exact" else None
        log.info("tuner.patch: %s %s %s: %s", fn.__name__, problem, dtype,
                 "tuned " + str(_answers[key]) if _answers[key] else "the library's choice")
    config = _answers[key]
    if config is None:
        return None
    names = list(bound.named)
    new_args = tuple(config.get(names[i], a) if names[i] in bound.constexprs else a
                     for i, a in enumerate(args))
    new_kwargs = {k: config.get(k, v) if k in bound.constexprs else v for k, v in kwargs.items()}
    new_kwargs.update({k: config[k] for k in LAUNCH_OPTIONS if k in config})
    return new_args, new_kwargs


def _wrap(cls: type) -> None:
    if cls in _originals:
        return
    orig = _originals[cls] = getattr(cls, "run")  # noqa: B009

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if not warmup:
            try:
                tuned = tuned_meta(self, args, kwargs)
            except Exception as exc:  # never break the library's launch
                log.warning("tuner.patch: %s launches its own choice (%s: %s)",
                            getattr(self.fn, "__name__", self), type(exc).__name__, exc)
                tuned = None
            if tuned is not None:
                args, kwargs = tuned
        return orig(self, *args, grid=grid, warmup=warmup, **kwargs)

    setattr(cls, "run", run)  # noqa: B010


def patch(modules: Iterable[str] | None = None, kernels: Iterable[str] | None = None, *,
          source: str | None = None) -> bool:
    """Launch the covered kernels with their tuned configs (see the module docstring); True
    when the patch is on (False with ``TUNER_PATCH=off``). Calling it again replaces the
    filters and the source."""
    if os.environ.get("TUNER_PATCH", "").lower() in ("off", "0", "false", "no"):
        return False
    from triton.runtime.jit import JITFunction

    with _lock:
        _filters["modules"] = None if modules is None else tuple(modules)
        _filters["kernels"] = None if kernels is None else tuple(kernels)
        _source[0] = source
        _answers.clear()
        _wrap(JITFunction)
        try:
            from triton.runtime.interpreter import InterpretedFunction

            _wrap(InterpretedFunction)
        except ImportError:
            pass
    return True


def unpatch() -> None:
    """Launch every kernel as the library chose again."""
    with _lock:
        for cls, orig in _originals.items():
            setattr(cls, "run", orig)  # noqa: B010
        _originals.clear()
        _answers.clear()
