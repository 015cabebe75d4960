"""A registry: one place that maps the names users give (``--backend``, ``--sampler``) to the
implementations behind them.

The module that defines an interface never imports its implementations; a registry module
beside it does, once, and everything that chooses an implementation by name asks the
registry. ``register`` adds one more (a plugin, a test double) without editing any chooser.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Mapping
from typing import Generic
from typing import TypeVar

T = TypeVar("T")


class UnknownName(ValueError):
    """A name the registry does not hold; the message lists the names it does."""


class Registry(Generic[T]):
    """Named implementations of one kind (``kind`` appears in error messages)."""

    def __init__(self, kind: str, entries: Mapping[str, T] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = dict(entries or {})

    def register(self, name: str, entry: T, *, replace: bool = False) -> None:
        """Add ``entry`` under ``name``; ``ValueError`` if the name is taken (unless
        ``replace``)."""
        if name in self._entries and not replace:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (``KeyError`` if it is not registered)."""
        del self._entries[name]

    def get(self, name: str) -> T:
        """The entry under ``name``; ``UnknownName`` (a ``ValueError``) otherwise."""
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownName(f"unknown {self.kind} {name!r} (choose from "
                              f"{', '.join(self._entries)})") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)
