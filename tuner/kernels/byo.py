"""Bring your own kernel: turn a ``@triton.autotune`` kernel into a ``KernelSpec``.

A plain ``@triton.jit`` kernel is tuned through a ``KernelSpec`` written by hand (README,
"Your own kernel"). A kernel already decorated with ``@triton.autotune`` carries its config list;
``from_autotune`` makes that list the starting point of a search space:

* each meta-parameter of the configs becomes a parameter over the values seen — widened by one
  power of two each way when every value is a power of two (``BLOCK_SIZE`` 256, 1024 →
  128…2048), so the search can go past the hand-written list;
* ``num_warps`` likewise (1…32), ``num_stages`` ranges over 1…max(seen + 1, 4);
* the configs themselves are the space's seeds: the default search measures them first.

The launch bypasses the autotuner (its ``fn`` is the ``@triton.jit`` kernel) and passes the
config's meta-parameters, ``num_warps`` and ``num_stages`` explicitly. Pre/post hooks and
``prune_configs_by`` of the decorator are not applied here; a module tuned by convention
(launcher, ``NAME_inputs``, ``NAME_reference``: ``tuner.kernels.convention``) needs no spec at
all and honours them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import torch

from search_spaces import Categorical
from search_spaces import Choice
from search_spaces import Constraint
from search_spaces import Param
from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from search_spaces.params import IntRange
from tuner.kernels.spec import KernelSpec
from tuner.kernels.spec import Problem

MAX_WARPS = 32


def _is_pow2(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


def _param(name: str, values: Sequence[Any], widen: bool, cap: int | None = None) -> Param:
    distinct = sorted(set(values), key=str)
    if widen and all(_is_pow2(v) for v in distinct):
        low, high = max(1, min(distinct) // 2), max(distinct) * 2
        return PowerOfTwo(name, low, min(high, cap) if cap else high)
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in distinct):
        return Choice(name, tuple(sorted(distinct)))
    return Categorical(name, tuple(distinct))


def autotune_space(name: str, configs: Sequence[Any], widen: bool = True,
                   constraints: Sequence[Constraint] = ()) -> SearchSpace:
    """The space spanned by a list of ``triton.Config`` (see the module docstring)."""
    if not configs:
        raise ValueError(f"{name}: the @triton.autotune decorator lists no configs")
    keys = sorted({k for c in configs for k in c.kwargs})
    missing = [k for k in keys if any(k not in c.kwargs for c in configs)]
    if missing:
        raise ValueError(f"{name}: configs disagree on the meta-parameters {missing}")
    params = [_param(k, [c.kwargs[k] for c in configs], widen) for k in keys]
    params.append(_param("num_warps", [c.num_warps for c in configs], widen, cap=MAX_WARPS))
    stages = [int(c.num_stages) for c in configs]
    params.append(IntRange("num_stages", 1, max(max(stages) + 1, 4)))
    seeds = [{**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}
             for c in configs]
    return SearchSpace(name=name, params=tuple(params),
                       constraints=(Constraint.of("threads_per_block"), *constraints),
                       seeds=SearchSpace.freeze_seeds(seeds))


def from_autotune(
    autotuned: Any, *, name: str, dims: Sequence[str], dtypes: Sequence[str],
    make_inputs: Callable[[Problem, str, int, str], dict[str, torch.Tensor]],
    args: Callable[[dict[str, torch.Tensor], Problem], Mapping[str, Any]],
    grid: Callable[[Problem, Mapping[str, Any]], tuple[int, ...]],
    reference: Callable[[dict[str, torch.Tensor], Problem], torch.Tensor],
    output: str,
    flops: Callable[[Problem, str], float],
    min_bytes: Callable[[Problem, str], float],
    tolerance: Mapping[str, float],
    description: str = "",
    compute_dtype: Callable[[str], str] | None = None,
    example_problem: Mapping[str, int] | None = None,
    widen: bool = True,
    constraints: Sequence[Constraint] = (),
) -> KernelSpec:
    """A ``KernelSpec`` for a ``@triton.autotune``-decorated kernel.

    ``args(tensors, problem)`` gives the kernel's keyword arguments other than the tuned
    meta-parameters; ``grid(problem, config)`` the launch grid for a config. The other fields
    are those of ``KernelSpec`` (``tuner/kernels/spec.py``); ``constraints`` are added to the
    space's (e.g. ``Constraint.of("tile_covers_problem", dims=(("BLOCK_N", "N"),))`` for a
    kernel that needs one block per row).
    """
    configs = getattr(autotuned, "configs", None)
    fn = getattr(autotuned, "fn", None)
    if configs is None or fn is None:
        raise TypeError(f"{name}: expected a @triton.autotune kernel, got {type(autotuned)!r}")
    space = autotune_space(name, configs, widen, constraints)
    meta = [p.name for p in space.params if p.name not in ("num_warps", "num_stages")]

    def launch(tensors: dict[str, torch.Tensor], problem: Problem,
               config: Mapping[str, Any]) -> None:
        kwargs = {k: config[k] for k in meta}
        fn[grid(problem, config)](**args(tensors, problem), **kwargs,
                                  num_warps=config["num_warps"],
                                  num_stages=config["num_stages"])

    extra: dict[str, Any] = {"source_path": inspect.getsourcefile(getattr(fn, "fn", fn))}
    if compute_dtype is not None:
        extra["compute_dtype"] = compute_dtype
    return KernelSpec(
        name=name, description=description or f"@triton.autotune kernel {name}",
        dims=tuple(dims), dtypes=tuple(dtypes), space=space, make_inputs=make_inputs,
        launch=launch, reference=reference, output=output, flops=flops, min_bytes=min_bytes,
        tolerance=dict(tolerance), example_problem=dict(example_problem or {}), **extra)
