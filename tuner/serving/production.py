"""Tuned configs in production code: ``triton.Config`` lists and a launcher decorator.

    from tuner.serving.production import triton_configs, tuned

    @triton.autotune(configs=triton_configs("matmul", "bf16", "h100-sxm", top_k=4), key=["M"])
    @triton.jit
    def my_matmul(...): ...

    @tuned("matmul", problem=lambda a, b, c: {"M": a.shape[0], "N": b.shape[1],
                                               "K": a.shape[1]}, dtype="fp16")
    def launch(a, b, c, *, config):      # config: the tuned parameters for this problem
        ...

``tuned`` looks the config up at call time through ``tuner.best_config`` (cached per process:
the first call per problem does I/O, later ones cost a dict lookup), and passes it as
``config=`` unless the caller gives one. Only ``triton_configs`` imports Triton.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import TypeVar

from tuner.core.launch import triton_form
from tuner.serving.lookup import best_config
from tuner.serving.lookup import default_source
from tuner.serving.lookup import shown_source
from tuner.serving.lookup import source_error

F = TypeVar("F", bound=Callable[..., Any])


def stored_configs(kernel: str, dtype: str, device_kind: str | None = None,
                   source: str | None = None) -> list[tuple[dict[str, Any], float]]:
    """Distinct stored best configs of a kernel (all problems), best fraction first, of
    ``device_kind`` (default: this process's device, as ``best_config`` decides; ``"any"``:
    every kind). Raises when the source cannot be read."""
    from tuner.serving.lookup import ANY_DEVICE
    from tuner.serving.lookup import default_kind
    from tuner.serving.lookup import default_source
    from tuner.serving.lookup import stored_entries

    src = source or default_source()
    entries = stored_entries(src, kernel, dtype)
    wanted = device_kind if device_kind is not None else default_kind(src)
    best: dict[str, tuple[dict[str, Any], float]] = {}
    for e in entries:
        if wanted != ANY_DEVICE and e["device_kind"] != wanted:
            continue
        key = repr(sorted(e["config"].items()))
        if key not in best or e["fraction"] > best[key][1]:
            best[key] = (dict(e["config"]), e["fraction"])
    return sorted(best.values(), key=lambda cf: -cf[1])


def to_triton_config(config: Mapping[str, Any]) -> Any:
    """A ``triton.Config`` from a flat config or an export entry (which carries its ``triton``
    form): meta-parameters as kwargs; ``num_warps``, ``num_stages``, ``num_ctas``, ``maxnreg``
    as launch options (Triton's defaults where the config has none)."""
    import triton

    form = config["triton"] if "triton" in config and "kwargs" in config["triton"] \
        else triton_form(dict(config))
    return triton.Config(**form)


def triton_configs(kernel: str, dtype: str, device_kind: str | None = None, top_k: int = 4,
                   source: str | None = None) -> list[Any]:
    """The ``top_k`` best distinct stored configs as ``triton.Config`` objects, for
    ``@triton.autotune(configs=...)``, of ``device_kind`` (default: this process's device);
    raises ``LookupError`` when none is stored."""
    found = stored_configs(kernel, dtype, device_kind, source)[:top_k]
    if not found:
        raise LookupError(f"no tuned configs for {kernel} {dtype}"
                          + (f" on {device_kind}" if device_kind else ""))
    return [to_triton_config(c) for c, _ in found]


def tuned(kernel: str, problem: Callable[..., Mapping[str, int]],
          dtype: str | Callable[..., str], device_kind: str | None = None,
          source: str | None = None, default: Mapping[str, Any] | None = None,
          ) -> Callable[[F], F]:
    """Decorate a launcher so that it receives the tuned ``config=`` for its arguments.

    ``problem(*args, **kwargs)`` gives the problem sizes, ``dtype`` is a name or a function of
    the arguments. With nothing tuned and no ``default``, the call raises ``LookupError``
    (saying why when the source cannot be read; with a ``default``, that is one
    ``RuntimeWarning`` and the default serves).
    """

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def launcher(*args: Any, **kwargs: Any) -> Any:
            if "config" not in kwargs:
                dt = dtype(*args, **kwargs) if callable(dtype) else dtype
                with warnings.catch_warnings():
                    if default is None:  # no default to serve: the error says it all
                        warnings.simplefilter("ignore", RuntimeWarning)
                    config = best_config(kernel, problem(*args, **kwargs), dt, device_kind,
                                         source=source, default=default)
                if config is None:
                    src = source or default_source()
                    why = source_error(src)
                    unread = f": cannot read {shown_source(src)} ({why})" if why else ""
                    raise LookupError(f"no tuned config for {kernel} {dt}{unread}")
                kwargs["config"] = config
            return fn(*args, **kwargs)

        return launcher  # type: ignore[return-value]

    return wrap
