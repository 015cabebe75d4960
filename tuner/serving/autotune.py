"""``tuner.autotune``: a drop-in for ``@triton.autotune`` that launches with tuned configs.

    import tuner

    @tuner.autotune(configs=[triton.Config({"BLOCK": 1024}, num_warps=4), ...],
                    key=["n_rows", "n_cols"])
    @triton.jit
    def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr): ...

    softmax_kernel[grid](x, y, n_rows, n_cols)     # unchanged call sites

At each launch the values of ``key`` are the problem (``{"n_rows": 4096, "n_cols": 1000}``),
the first tensor argument's dtype the dtype, and ``tuner.best_config`` finds the tuned config
(from ``source``, ``TUNER_BEST_CONFIGS`` or the service database; exact, bucket or nearest
tier, for this process's device kind). The kernel then runs with that config's
meta-parameters and launch options (``num_warps``, ``num_stages``, ``num_ctas``,
``maxnreg``). With no tuned config — nothing stored, an unreadable source, or a stored config
that lacks one of the kernel's meta-parameters — the launch falls back to the kernel's own
configs through Triton's autotuner, exactly as ``@triton.autotune`` would (on the Triton
interpreter, which Triton's autotuner cannot benchmark on, the first of them). Every other keyword
(``prune_configs_by``, ``reset_to_zero``, ``restore_value``, ``pre_hook``, ``post_hook``, …) is
Triton's and goes to it. A production launch never raises because of the lookup: a failing
source gives one warning per process and the fallback.

**Which config did a launch use?** ``kernel.served(*args)`` says (the config, its tier —
``exact``, ``bucket``, ``nearest`` or ``fallback`` — the problem and device kind it was tuned
for); each answer is logged once per process and key to the ``tuner.autotune`` logger (INFO),
and printed to stderr when ``TRITON_PRINT_AUTOTUNING=1``, as Triton prints its own autotuning.
A source that cannot be read gives one ``RuntimeWarning`` pointing at the launch.

``record_missing=True`` (or a path) appends every problem served by anything but the exact
tier to a JSON-lines file (``TUNER_MISSING_SHAPES``, default ``<data dir>/missing-shapes.jsonl``)
once per process; ``tuner tune --missing FILE`` tunes them later. The answer for a key is looked
up once per process and cached: later launches cost one dict lookup more than Triton's own.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys
import threading
import warnings
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.core.launch import triton_form
from tuner.kernels.identity import jit_identity
from tuner.serving.lookup import best_config

#: torch dtype names (``str(tensor.dtype)``) → the service's dtype names.
DTYPE_NAMES = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16",
               "torch.float8_e4m3fn": "fp8e4m3"}
_LOCK = threading.Lock()
log = logging.getLogger("tuner.autotune")


def _warn_at_launch(message: str) -> None:
    """A ``RuntimeWarning`` attributed to the user's launch (the first frame outside this
    module), not to the lookup's internals."""
    frame = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(message, RuntimeWarning, stacklevel=level)


def missing_shapes_path() -> Path:
    """Where ``record_missing=True`` writes: ``TUNER_MISSING_SHAPES``, else the data dir."""
    if os.environ.get("TUNER_MISSING_SHAPES"):
        return Path(os.environ["TUNER_MISSING_SHAPES"])
    from tuner.core.settings import data_dir_of

    return data_dir_of() / "missing-shapes.jsonl"


class TunedKernel:
    """An autotuned Triton kernel that launches with tuned configs (see the module docstring).

    Attributes Triton's autotuner has (``configs``, ``keys``, ``fn``, ``arg_names``,
    ``best_config`` …) are its own, so tools that read them keep working."""

    def __init__(self, autotuner: Any, name: str, key: list[str], dtype: str | None,
                 device_kind: str | None, source: str | None,
                 record_missing: bool | str | Path, identity: str | None = None) -> None:
        self._autotuner = autotuner
        self.tuner_name = name
        self._key = list(key)
        self._dtype = dtype
        self._device_kind = device_kind
        self._source = source
        self._record = record_missing
        self._answers: dict[tuple[Any, ...], Any] = {}
        self._served: dict[tuple[Any, ...], tuple[dict[str, Any], Any]] = {}
        self._identity = identity
        self._recorded: set[tuple[Any, ...]] = set()
        self._meta = {p for p in autotuner.arg_names}
        hooks = {id(c.pre_hook): c.pre_hook for c in autotuner.configs}
        self._pre_hook = next(iter(hooks.values())) if len(hooks) == 1 else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_autotuner"], name)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        config = self.tuned_config(*args, **kwargs)
        if config is None:
            if os.environ.get("TRITON_INTERPRET") != "1" or len(self._autotuner.configs) < 2:
                return self._autotuner.run(*args, **kwargs)  # the kernel's own configs
            # Triton's autotuner cannot benchmark on the interpreter (it has no driver there):
            # its first config, as a single-config @triton.autotune would run.
            config = self._autotuner.configs[0]
        self._autotuner.best_config = config
        if config.pre_hook is not None:
            nargs = dict(zip(self._autotuner.arg_names, args, strict=False))
            config.pre_hook({**nargs, **kwargs, **config.all_kwargs()})
        return self._autotuner.fn.run(*args, **kwargs, **config.all_kwargs())

    def warmup(self, *args: Any, **kwargs: Any) -> Any:
        return self._autotuner.warmup(*args, **kwargs)

    def _cache_key(self, args: tuple[Any, ...], kwargs: Mapping[str, Any],
                   ) -> tuple[tuple[Any, ...], str]:
        nargs = {**dict(zip(self._autotuner.arg_names, args, strict=False)), **kwargs}
        values = tuple(nargs.get(k) for k in self._key)
        dtype = self._dtype or next((DTYPE_NAMES.get(str(v.dtype), str(v.dtype))
                                     for v in nargs.values() if hasattr(v, "dtype")), "fp32")
        return values, dtype

    def tuned_config(self, *args: Any, **kwargs: Any) -> Any:
        """The ``triton.Config`` a launch with these arguments uses, or None (fallback)."""
        values, dtype = self._cache_key(args, kwargs)
        cache_key = (*values, dtype)
        try:
            return self._answers[cache_key]
        except KeyError:
            pass
        with _LOCK:
            answer = self._answers[cache_key] = self._look_up(values, dtype, kwargs)
        return answer

    def served(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """What a launch with these arguments uses: ``config`` (its meta-parameters and
        launch options; None on fallback), ``tier`` (``exact``, ``bucket``, ``nearest`` or
        ``fallback``: the kernel's own configs), ``problem`` and ``dtype`` asked,
        ``tuned_for`` / ``device_kind`` of the stored config (None on fallback) and ``stale``:
        why it may no longer be right (``tuner.serving.staleness``; computed on this call)."""
        self.tuned_config(*args, **kwargs)
        values, dtype = self._cache_key(args, kwargs)
        served, found = self._served[(*values, dtype)]
        return {**served, "stale": [] if found is None else list(found.stale_reasons)}

    def _look_up(self, values: tuple[Any, ...], dtype: str, given: Mapping[str, Any]) -> Any:
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            self._report(values, dtype, None, None, "its key is not a problem size")
            return None  # a key that is not a size cannot be a tuned problem
        problem = dict(zip(self._key, values, strict=True))
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                found = best_config(self.tuner_name, problem, dtype, self._device_kind,
                                    source=self._source, identity=self._identity)
            for w in caught:
                _warn_at_launch(f"{w.message}".replace(
                    "serving defaults", f"{self.tuner_name} falls back to the kernel's own "
                    "configs").replace("tuner: ", "tuner.autotune: ", 1))
        except Exception as exc:  # never fail a production launch over a lookup
            _warn_at_launch(f"tuner.autotune: lookup of {self.tuner_name} failed ({exc}); "
                            "it falls back to the kernel's own configs")
            found = None
        if self._record and (found is None or found.tier != "exact"):
            self._note_missing(problem, dtype, None if found is None else found.tier)
        if found is None or found.tier == "default":
            self._report(values, dtype, None, None, "nothing tuned for it")
            return None
        config = self._as_triton(found, given)
        if config is None:
            self._report(values, dtype, None, found, "the stored config lacks one of the "
                         "kernel's meta-parameters")
            return None
        self._report(values, dtype, config, found, "")
        return config

    def _report(self, values: tuple[Any, ...], dtype: str, config: Any, found: Any,
                why: str) -> None:
        """Record what a key is served and say it once (logger; stderr on request)."""
        problem = dict(zip(self._key, values, strict=True))
        tier = found.tier if config is not None else "fallback"
        served = {"config": None if config is None else config.all_kwargs(), "tier": tier,
                  "problem": problem, "dtype": dtype,
                  "tuned_for": None if config is None else found.problem,
                  "device_kind": None if config is None else found.device_kind}
        self._served[(*values, dtype)] = (served, None if config is None else found)
        asked = ",".join(f"{k}={v}" for k, v in problem.items())
        if config is None:
            text = (f"tuner.autotune: {self.tuner_name} {asked} {dtype}: the kernel's own "
                    f"configs ({why})")
        else:
            tuned = ",".join(f"{k}={v}" for k, v in (found.problem or {}).items())
            chosen = " ".join(f"{k}={v}" for k, v in config.all_kwargs().items())
            text = (f"tuner.autotune: {self.tuner_name} {asked} {dtype}: tier {tier} (tuned "
                    f"for {tuned} on {found.device_kind}): {chosen}")
        log.info(text)
        if os.environ.get("TRITON_PRINT_AUTOTUNING") == "1":
            print(text, file=sys.stderr, flush=True)

    def _as_triton(self, found: Mapping[str, Any], given: Mapping[str, Any]) -> Any:
        import triton

        form = triton_form(found)
        own = {k for c in self._autotuner.configs for k in c.kwargs}
        meta = {k: v for k, v in form["kwargs"].items() if k in self._meta}
        if not own <= set(meta) | set(given):
            return None  # stored for another kernel of that name: do not guess
        form["kwargs"] = {k: v for k, v in meta.items() if k not in given}
        return triton.Config(**form, pre_hook=self._pre_hook)

    def _note_missing(self, problem: dict[str, int], dtype: str, tier: str | None) -> None:
        from tuner.core.devices.local import local_device_kind

        key = (tuple(problem.items()), dtype)
        if key in self._recorded:
            return
        self._recorded.add(key)
        fn = self._autotuner.fn
        while hasattr(fn, "fn"):
            fn = fn.fn
        try:
            source_file = inspect.getsourcefile(fn)
        except TypeError:
            source_file = None
        line = {"kernel": self.tuner_name, "file": source_file, "problem": problem,
                "dtype": dtype, "device_kind": self._device_kind or local_device_kind(),
                "served": tier or "none"}
        path = missing_shapes_path() if self._record is True else Path(str(self._record))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(json.dumps(line, sort_keys=True) + "\n")
        except OSError as exc:
            warnings.warn(f"tuner: cannot record a missing shape in {path} ({exc})",
                          RuntimeWarning, stacklevel=5)


def autotune(configs: list[Any], key: list[str], *, name: str | None = None,
             dtype: str | None = None, device_kind: str | None = None,
             source: str | None = None, record_missing: bool | str | Path = False,
             **triton_options: Any) -> Callable[[Any], TunedKernel]:
    """Decorate a ``@triton.jit`` kernel like ``@triton.autotune`` (see the module docstring).

    ``name``: the kernel name the results were stored under (default: the function's name,
    which is what ``tuner tune path.py:launcher`` stores); ``dtype``: the dtype to look up
    (default: the first tensor argument's); ``device_kind``: default this process's device."""
    import triton

    def decorate(fn: Any) -> TunedKernel:
        inner = triton.autotune(configs=configs, key=key, **triton_options)(fn)
        base = fn
        while hasattr(base, "fn"):
            base = base.fn
        identity = None
        if name is None:  # its own results: by its source, not a name another kernel may share
            try:
                identity = jit_identity(fn)
            except (ValueError, OSError, TypeError):
                identity = None
        return TunedKernel(inner, name or base.__name__, key, dtype, device_kind, source,
                           record_missing, identity)

    return decorate
