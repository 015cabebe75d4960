"""Did a launch compile, or did its binaries come from Triton's cache?

Triton (3.4 and later) calls ``triton.knobs.compilation.listener`` after every ``compile``
with ``cache_hit``; a launch that finds its kernel in the JIT function's in-memory cache calls
no compile at all. ``CompileWatch`` counts both kinds over a block of code, so a bench or
compile process can say whether a config cost a compile (``cache_hit=False``), was loaded
from the on-disk cache or memory (``True``), or cannot tell on an older Triton (``None``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class CompileCount:
    """Compiles seen in a block: ``misses`` compiled, ``hits`` came from the disk cache."""

    hits: int = 0
    misses: int = 0
    supported: bool = True

    @property
    def cache_hit(self) -> bool | None:
        """True when nothing was compiled (a launch from memory counts as a hit)."""
        return self.misses == 0 if self.supported else None


_active: list[CompileCount] = []
_installed = False


def _listener(*, cache_hit: bool, **_: Any) -> None:
    for count in _active:
        if cache_hit:
            count.hits += 1
        else:
            count.misses += 1


def _install() -> bool:
    global _installed
    if _installed:
        return True
    try:
        from triton import knobs
    except ImportError:
        return False
    compilation = getattr(knobs, "compilation", None)
    if compilation is None or not hasattr(compilation, "listener"):
        return False
    compilation.listener = _listener
    _installed = True
    return True


@contextmanager
def watch_compiles() -> Iterator[CompileCount]:
    """Count Triton compiles (and cache hits) inside the block."""
    count = CompileCount(supported=_install())
    _active.append(count)
    try:
        yield count
    finally:
        _active.remove(count)
