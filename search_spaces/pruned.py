"""Every valid config of a space, found by a depth-first walk that prunes with the constraints.

``SearchSpace.valid_configs`` checks each constraint on every point of the grid; where the grid
is huge and its valid configs are rare (a fused chain on a small problem: 3,765 valid among 27
million points), that walk, or a uniform random sample filtered by the constraints, is hopeless.
Here the parameters are assigned in declaration order and each constraint is checked as soon as
it can be decided: it is called on the partial config through a mapping that raises
``Undecided`` when the predicate reads a parameter not assigned yet (``config[name]``,
``name in config``, ``config.get(name)``, iterating). A predicate that returns without reading
one decides every completion of the partial config alike, so a ``False`` prunes all of them; one
that reads an unassigned parameter is asked again after the next assignment. The result is
exactly ``valid_configs`` (in the same order) for predicates that are pure functions of what
they read; ``Undecided`` derives from ``BaseException`` so that a predicate's own
``except Exception`` cannot swallow it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any

from search_spaces.constraints import Constraint
from search_spaces.context import Context
from search_spaces.space import Config
from search_spaces.space import SearchSpace


class Undecided(BaseException):
    """A constraint read a parameter that is not assigned yet."""


class _Partial(Mapping[str, Any]):
    """The assigned values; reading any name in ``pending`` (or iterating while any is pending)
    raises ``Undecided``."""

    def __init__(self, values: Config, pending: frozenset[str]) -> None:
        self._values, self._pending = values, pending

    def __getitem__(self, name: str) -> Any:
        if name in self._pending:
            raise Undecided(name)
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        if name in self._pending:
            raise Undecided(name)
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        if self._pending:
            raise Undecided("iteration")
        return iter(self._values)

    def __len__(self) -> int:
        if self._pending:
            raise Undecided("len")
        return len(self._values)


class _Stop(Exception):
    """The walk ran out of its configs or seconds."""


def pruned_valid_configs(space: SearchSpace, ctx: Context, max_configs: int,
                         max_seconds: float) -> list[Config] | None:
    """Every valid config of ``space`` for ``ctx``, in declaration order; ``None`` when there
    are more than ``max_configs`` of them or the walk takes more than ``max_seconds`` (seconds
    of wall time, checked at every assignment)."""
    params = space.params
    pending = [frozenset(p.name for p in params[i:]) for i in range(len(params) + 1)]
    found: list[Config] = []
    deadline = time.monotonic() + max_seconds

    def walk(i: int, partial: Config, open_constraints: list[Constraint]) -> None:
        if time.monotonic() > deadline:
            raise _Stop
        view = _Partial(partial, pending[i])
        still = []
        for constraint in open_constraints:
            try:
                if not constraint.check(view, ctx):
                    return
            except Undecided:
                still.append(constraint)
        if i == len(params):
            found.append(dict(partial))
            if len(found) > max_configs:
                raise _Stop
            return
        param = params[i]
        if not param.active(partial):
            walk(i + 1, partial, still)
            return
        for value in param.values():
            partial[param.name] = value
            walk(i + 1, partial, still)
        del partial[param.name]

    try:
        walk(0, {}, list(space.constraints))
    except _Stop:
        return None
    return found
