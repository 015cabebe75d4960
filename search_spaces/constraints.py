"""Constraints: named Python predicates over (config, context), registered once.

A constraint in a space is a value (``Constraint(name, args)``) that points at a registered
function, so a space serialises to JSON and back without evaluating strings. The function
receives the whole config, the ``Context`` (problem, dtype, target limits) and the constraint's
own arguments, and returns True when the config is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from search_spaces.context import Context

Predicate = Callable[..., bool]

_REGISTRY: dict[str, tuple[Predicate, str]] = {}
#: Names registered by ``defer``: placeholders a real ``register`` replaces.
_DEFERRED: set[str] = set()


def register(name: str, doc: str) -> Callable[[Predicate], Predicate]:
    """Decorator: register ``fn(config, ctx, **args) -> bool`` under ``name``.

    ``doc`` is the one-line reason shown when a config violates it.
    """

    def wrap(fn: Predicate) -> Predicate:
        if name in _DEFERRED:
            _DEFERRED.discard(name)
        elif name in _REGISTRY and _REGISTRY[name][0] is not fn:
            raise ValueError(f"constraint {name!r} is already registered")
        _REGISTRY[name] = (fn, doc)
        return fn

    return wrap


def _allow(config: Mapping[str, Any], ctx: Context, **args: Any) -> bool:
    return True


def defer(name: str, doc: str) -> None:
    """Stand in for a constraint registered by a user's kernel module that this process does
    not import (it runs only in bench processes): here every config passes it; the bench
    process, which imports the module, applies the real one."""
    if name not in _REGISTRY:
        _REGISTRY[name] = (_allow, doc)
        _DEFERRED.add(name)


def is_deferred(name: str) -> bool:
    return name in _DEFERRED


def registered() -> dict[str, str]:
    """Names and one-line descriptions of every registered constraint."""
    return {name: doc for name, (_, doc) in sorted(_REGISTRY.items())}


@dataclass(frozen=True)
class Constraint:
    """A reference to a registered predicate plus its JSON-scalar arguments."""

    name: str
    args: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, name: str, **args: Any) -> Constraint:
        if name not in _REGISTRY:
            raise ValueError(f"unknown constraint {name!r}; registered: {sorted(_REGISTRY)}")
        return cls(name, tuple(sorted(args.items())))

    @property
    def doc(self) -> str:
        return _REGISTRY[self.name][1]

    def check(self, config: Mapping[str, Any], ctx: Context) -> bool:
        fn = _REGISTRY[self.name][0]
        return bool(fn(config, ctx, **dict(self.args)))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "args": {k: _jsonable(v) for k, v in self.args}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Constraint:
        args = {k: _frozen(v) for k, v in dict(data.get("args", {})).items()}
        return cls.of(str(data["name"]), **args)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def _frozen(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value


def next_pow2(n: int) -> int:
    """Smallest power of two ≥ ``n`` (1 for n ≤ 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


@register("tile_covers_problem", "a kernel that does not loop needs a tile spanning the dimension")
def tile_covers_problem(config: Mapping[str, Any], ctx: Context, *,
                        dims: tuple[tuple[str, str], ...]) -> bool:
    """Each ``(param, dim)`` pair: ``config[param] ≥ problem[dim]``."""
    return all(param not in config or config[param] >= ctx.problem[dim] for param, dim in dims)


@register("tile_fits_problem", "a tile is larger than the problem needs")
def tile_fits_problem(config: Mapping[str, Any], ctx: Context, *,
                      dims: tuple[tuple[str, str], ...], minimum: int = 16) -> bool:
    """Each ``(param, dim)`` pair: ``config[param] ≤ max(minimum, next_pow2(problem[dim]))``.

    Larger tiles only add masked-out work (Inductor clamps the same way).
    """
    for param, dim in dims:
        if param in config and config[param] > max(minimum, next_pow2(ctx.problem[dim])):
            return False
    return True


@register("threads_per_block", "num_warps × warp size exceeds the threads a block may have")
def threads_per_block(config: Mapping[str, Any], ctx: Context) -> bool:
    limit = ctx.target.max_threads_per_block
    return limit is None or int(config["num_warps"]) * ctx.target.warp_size <= limit
