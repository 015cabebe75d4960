"""The valid configs of a space, found by a depth-first walk that prunes with the constraints
(``SearchSpace.valid_configs``).

Checking each constraint on every point of the grid is hopeless where the grid is huge and its
valid configs rare (a fused chain on a small problem: 3,765 valid among 27 million points).
Here the parameters are assigned in declaration order and each constraint is checked as soon as
it can be decided: it is called on the partial config through a mapping that raises
``Undecided`` when the predicate reads a parameter not assigned yet (``config[name]``,
``name in config``, ``config.get(name)``, iterating). A predicate that returns without reading
one decides every completion of the partial config alike, so a ``False`` prunes all of them; one
that reads an unassigned parameter is asked again after the next assignment, also when it
caught ``Undecided`` itself and returned anyway (the mapping remembers the read). The walk
yields exactly the configs of the grid that satisfy every constraint, in the grid's order, for
predicates that are pure functions of what they read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from search_spaces.constraints import Constraint
from search_spaces.context import Context
from search_spaces.params import Param


class Undecided(BaseException):
    """A constraint read a parameter that is not assigned yet (a ``BaseException``, so that a
    predicate's own ``except Exception`` lets it through)."""


class WalkExpired(Exception):
    """The walk passed its deadline before it found the next valid config."""


class _Partial(Mapping[str, Any]):
    """The assigned values; reading any name in ``pending`` (or iterating while any is pending)
    raises ``Undecided`` and sets ``read_pending``."""

    def __init__(self, values: dict[str, Any], pending: frozenset[str]) -> None:
        self._values, self._pending = values, pending
        self.read_pending = False

    def _undecided(self, what: str) -> Undecided:
        self.read_pending = True
        return Undecided(what)

    def __getitem__(self, name: str) -> Any:
        if name in self._pending:
            raise self._undecided(name)
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        if name in self._pending:
            raise self._undecided(str(name))
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        if self._pending:
            raise self._undecided("iteration")
        return iter(self._values)

    def __len__(self) -> int:
        if self._pending:
            raise self._undecided("len")
        return len(self._values)


def _decided_false(constraint: Constraint, values: dict[str, Any], pending: frozenset[str],
                   ctx: Context) -> bool | None:
    """``True`` when ``constraint`` fails on every completion of ``values``, ``False`` when it
    holds on all of them, ``None`` when it read a parameter in ``pending``."""
    view = _Partial(values, pending)
    try:
        holds = constraint.check(view, ctx)
    except Undecided:
        return None
    return None if view.read_pending else not holds


def valid_points(params: Sequence[Param], constraints: Sequence[Constraint], ctx: Context,
                 deadline: float | None = None) -> Iterator[dict[str, Any]]:
    """Every config of the grid of ``params`` that satisfies ``constraints`` for ``ctx``, in
    declaration order (inactive conditional parameters absent), each a fresh dict. Raises
    ``WalkExpired`` once ``time.monotonic()`` passes ``deadline`` (checked at every assignment);
    ``None``: no deadline."""
    pending = [frozenset(p.name for p in params[i:]) for i in range(len(params) + 1)]
    partial: dict[str, Any] = {}

    def walk(i: int, open_constraints: list[Constraint]) -> Iterator[dict[str, Any]]:
        if deadline is not None and time.monotonic() > deadline:
            raise WalkExpired
        still = []
        for constraint in open_constraints:
            verdict = _decided_false(constraint, partial, pending[i], ctx)
            if verdict:
                return
            if verdict is None:
                still.append(constraint)
        if i == len(params):
            yield dict(partial)
            return
        param = params[i]
        if not param.active(partial):
            yield from walk(i + 1, still)
            return
        for value in param.values():
            partial[param.name] = value
            yield from walk(i + 1, still)
        del partial[param.name]

    return walk(0, list(constraints))
