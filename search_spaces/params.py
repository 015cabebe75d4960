"""Declarative parameter types of a search space.

A parameter is a value: a name, a finite domain and, optionally, a condition on other
parameters (``when``) under which it exists at all. Conditional parameters give
define-by-run spaces: a fusion grouping chooses which kernels exist, and each kernel brings its
own parameters.

Domains are finite and ordered as declared; ``ordered`` says whether neighbouring values are
"close" (block sizes, stages) or unrelated labels (a grouping name, an activation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import ClassVar

Scalar = int | float | str | bool


def _freeze_when(when: Mapping[str, Any] | None) -> tuple[tuple[str, tuple[Scalar, ...]], ...]:
    if not when:
        return ()
    return tuple(sorted((str(k), tuple(v)) for k, v in when.items()))


@dataclass(frozen=True)
class Param:
    """Base of all parameter types. Subclasses define ``values()`` and their JSON ``kind``."""

    name: str
    when: tuple[tuple[str, tuple[Scalar, ...]], ...] = field(default=(), kw_only=True)

    kind: ClassVar[str] = "param"
    ordered: ClassVar[bool] = True

    def values(self) -> tuple[Scalar, ...]:
        raise NotImplementedError

    def contains(self, value: Any) -> bool:
        """True when ``value`` is in the domain (``True`` does not count as ``1``)."""
        return any(
            value == v and isinstance(value, bool) == isinstance(v, bool) for v in self.values()
        )

    def active(self, config: Mapping[str, Any]) -> bool:
        """True when every ``when`` condition holds for the values already in ``config``."""
        return all(config.get(dep) in allowed for dep, allowed in self.when)

    def _json_fields(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.kind, "name": self.name, **self._json_fields()}
        if self.when:
            data["when"] = {k: list(v) for k, v in self.when}
        return data


def _check_options(name: str, options: tuple[Any, ...]) -> None:
    if not options:
        raise ValueError(f"parameter {name!r}: needs at least one value")
    if len(set(options)) != len(options):
        raise ValueError(f"parameter {name!r}: repeated values in {options}")


@dataclass(frozen=True)
class Choice(Param):
    """An ordered list of numeric values, e.g. ``Choice("GROUP_M", (1, 4, 8, 16))``."""

    options: tuple[int | float, ...] = ()
    kind: ClassVar[str] = "choice"

    def __post_init__(self) -> None:
        _check_options(self.name, self.options)

    def values(self) -> tuple[Scalar, ...]:
        return tuple(self.options)

    def _json_fields(self) -> dict[str, Any]:
        return {"values": list(self.options)}


@dataclass(frozen=True)
class PowerOfTwo(Param):
    """Every power of two from ``low`` to ``high`` inclusive (both powers of two)."""

    low: int = 1
    high: int = 1
    kind: ClassVar[str] = "power_of_two"

    def __post_init__(self) -> None:
        for bound in (self.low, self.high):
            if bound < 1 or bound & (bound - 1):
                raise ValueError(f"parameter {self.name!r}: {bound} is not a power of two")
        if self.low > self.high:
            raise ValueError(f"parameter {self.name!r}: low {self.low} > high {self.high}")

    def values(self) -> tuple[Scalar, ...]:
        out: list[Scalar] = []
        v = self.low
        while v <= self.high:
            out.append(v)
            v *= 2
        return tuple(out)

    def _json_fields(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high}


@dataclass(frozen=True)
class IntRange(Param):
    """Integers ``low, low+step, …`` up to and including ``high``."""

    low: int = 0
    high: int = 0
    step: int = 1
    kind: ClassVar[str] = "int_range"

    def __post_init__(self) -> None:
        if self.step < 1:
            raise ValueError(f"parameter {self.name!r}: step must be positive")
        if self.low > self.high:
            raise ValueError(f"parameter {self.name!r}: low {self.low} > high {self.high}")

    def values(self) -> tuple[Scalar, ...]:
        return tuple(range(self.low, self.high + 1, self.step))

    def _json_fields(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "step": self.step}


@dataclass(frozen=True)
class Categorical(Param):
    """Unordered labels (strings or booleans), e.g. an activation or a fusion grouping."""

    options: tuple[str | bool | int, ...] = ()
    kind: ClassVar[str] = "categorical"
    ordered: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _check_options(self.name, self.options)

    def values(self) -> tuple[Scalar, ...]:
        return tuple(self.options)

    def _json_fields(self) -> dict[str, Any]:
        return {"values": list(self.options)}


def param_from_json(data: Mapping[str, Any]) -> Param:
    """Inverse of ``Param.to_json``; raises ``ValueError`` for an unknown type."""
    kind = data.get("type")
    when = _freeze_when(data.get("when"))
    name = str(data["name"])
    if kind == Choice.kind:
        return Choice(name, tuple(data["values"]), when=when)
    if kind == PowerOfTwo.kind:
        return PowerOfTwo(name, int(data["low"]), int(data["high"]), when=when)
    if kind == IntRange.kind:
        return IntRange(name, int(data["low"]), int(data["high"]), int(data.get("step", 1)),
                        when=when)
    if kind == Categorical.kind:
        return Categorical(name, tuple(data["values"]), when=when)
    raise ValueError(f"unknown parameter type {kind!r}")


def when(**conditions: tuple[Scalar, ...] | list[Scalar],
         ) -> tuple[tuple[str, tuple[Scalar, ...]], ...]:
    """Build a ``when=`` condition: ``when(grouping=("split",))``."""
    return _freeze_when(conditions)
