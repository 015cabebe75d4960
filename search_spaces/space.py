"""A search space: parameters, constraints and known-good starting configs, as one value.

The space is declarative: it serialises to JSON (``to_json``/``from_json``), has a stable hash
(``space_hash``) and never evaluates strings. ``suggest`` walks the parameters define-by-run
(skipping conditional ones whose condition fails), which is exactly Optuna's trial interface;
``configs`` enumerates the same tree exhaustively.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Protocol

from search_spaces.canonical import stable_hash
from search_spaces.constraints import Constraint
from search_spaces.context import Context
from search_spaces.params import IntRange
from search_spaces.params import Param
from search_spaces.params import param_from_json
from search_spaces.pruned import valid_points

Config = dict[str, Any]

#: Bump when the JSON layout of a space changes, so old hashes never collide with new ones.
SPACE_SCHEMA_VERSION = 1


class Suggester(Protocol):
    """What ``SearchSpace.suggest`` needs from a sampler; ``optuna.Trial`` satisfies it."""

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any: ...

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1,
                    log: bool = False) -> int: ...


@dataclass(frozen=True)
class SearchSpace:
    """Parameters (in dependency order), constraints, and seed configs tried first by default.

    ``seeds`` are complete configs known to be good in general (e.g. Triton's tutorial list);
    a seed that is invalid for a given problem is simply skipped.
    """

    name: str
    params: tuple[Param, ...]
    constraints: tuple[Constraint, ...] = ()
    seeds: tuple[tuple[tuple[str, Any], ...], ...] = field(default=())

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"space {self.name!r}: repeated parameter names")
        for i, p in enumerate(self.params):
            for dep, _ in p.when:
                if dep not in names[:i]:
                    raise ValueError(
                        f"space {self.name!r}: {p.name!r} depends on {dep!r}, which must be "
                        "declared before it")

    # -- construction helpers -------------------------------------------------------------
    @staticmethod
    def freeze_seeds(seeds: Sequence[Mapping[str, Any]],
                     ) -> tuple[tuple[tuple[str, Any], ...], ...]:
        return tuple(tuple(sorted(s.items())) for s in seeds)

    def seed_configs(self) -> list[Config]:
        return [dict(s) for s in self.seeds]

    # -- domain ---------------------------------------------------------------------------
    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def active_params(self, config: Mapping[str, Any]) -> list[Param]:
        """Parameters that exist for this config (conditions evaluated in declaration order)."""
        out: list[Param] = []
        for p in self.params:
            if p.active(config):
                out.append(p)
        return out

    def domain_errors(self, config: Mapping[str, Any]) -> list[str]:
        """Why ``config`` is not a point of this space (missing/extra keys, values off-domain)."""
        errors: list[str] = []
        active = self.active_params(config)
        for p in active:
            if p.name not in config:
                errors.append(f"missing parameter {p.name!r}")
            elif not p.contains(config[p.name]):
                errors.append(f"{p.name}={config[p.name]!r} is not one of {list(p.values())}")
        extra = set(config) - {p.name for p in active}
        errors.extend(f"unknown parameter {name!r}" for name in sorted(extra))
        return errors

    def violations(self, config: Mapping[str, Any], ctx: Context) -> list[str]:
        """Domain errors plus the constraints ``config`` breaks for ``ctx`` (empty = valid)."""
        errors = self.domain_errors(config)
        if errors:
            return errors
        return [f"{c.name}: {c.doc}" for c in self.constraints if not c.check(config, ctx)]

    def is_valid(self, config: Mapping[str, Any], ctx: Context) -> bool:
        return not self.violations(config, ctx)

    # -- enumeration and sampling -----------------------------------------------------------
    def configs(self) -> Iterator[Config]:
        """Every point of the space (constraints not applied), in declaration order."""
        yield from self._expand({}, 0)

    def _expand(self, partial: Config, index: int) -> Iterator[Config]:
        if index == len(self.params):
            yield dict(partial)
            return
        p = self.params[index]
        if not p.active(partial):
            yield from self._expand(partial, index + 1)
            return
        for v in p.values():
            partial[p.name] = v
            yield from self._expand(partial, index + 1)
        del partial[p.name]

    def valid_configs(self, ctx: Context, deadline: float | None = None) -> Iterator[Config]:
        """Points of the space that satisfy every constraint for ``ctx``, in ``configs``'s
        order, lazily: a walk that prunes every completion of a partial config a constraint
        already refuses (``search_spaces.pruned``). Raises ``WalkExpired`` once
        ``time.monotonic()`` passes ``deadline`` (``None``: never)."""
        return valid_points(self.params, self.constraints, ctx, deadline)

    def size(self) -> int:
        """Number of points (constraints not applied)."""
        if not any(p.when for p in self.params):
            return math.prod(len(p.values()) for p in self.params)
        deps = {dep for p in self.params for dep, _ in p.when}

        def count(index: int, partial: Config) -> int:
            # Branch only on the parameters that conditions read; multiply the rest.
            if index == len(self.params):
                return 1
            p = self.params[index]
            if not p.active(partial):
                return count(index + 1, partial)
            if p.name not in deps:
                return len(p.values()) * count(index + 1, partial)
            total = 0
            for v in p.values():
                partial[p.name] = v
                total += count(index + 1, partial)
            del partial[p.name]
            return total

        return count(0, {})

    def suggest(self, trial: Suggester) -> Config:
        """Define-by-run: ask ``trial`` for every active parameter, in declaration order."""
        config: Config = {}
        for p in self.params:
            if not p.active(config):
                continue
            if isinstance(p, IntRange):
                config[p.name] = trial.suggest_int(p.name, p.low, p.high, step=p.step)
            else:
                config[p.name] = trial.suggest_categorical(p.name, list(p.values()))
        return config

    def default_config(self, ctx: Context) -> Config | None:
        """The first seed valid for ``ctx``, else the first valid point, else ``None``."""
        for seed in self.seed_configs():
            if self.is_valid(seed, ctx):
                return seed
        return next(iter(self.valid_configs(ctx)), None)

    # -- serialisation ----------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SPACE_SCHEMA_VERSION,
            "name": self.name,
            "params": [p.to_json() for p in self.params],
            "constraints": [c.to_json() for c in self.constraints],
            "seeds": [dict(s) for s in self.seeds],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SearchSpace:
        if data.get("schema") != SPACE_SCHEMA_VERSION:
            raise ValueError(f"unsupported space schema {data.get('schema')!r}")
        return cls(
            name=str(data["name"]),
            params=tuple(param_from_json(p) for p in data["params"]),
            constraints=tuple(Constraint.from_json(c) for c in data.get("constraints", [])),
            seeds=cls.freeze_seeds(data.get("seeds", [])),
        )

    def space_hash(self) -> str:
        """SHA-256 of the canonical JSON: equal spaces hash equal in every process."""
        return stable_hash(self.to_json())

