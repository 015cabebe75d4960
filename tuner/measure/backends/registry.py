"""Backends by name: ``make_backend("replay:<file>")`` and friends, through one registry.

A backend name is ``scheme`` or ``scheme:argument``; the scheme picks the implementation and
the whole name is passed to it:

* ``interpret``, ``cuda``, ``cuda:N`` and ``standin:<gpu kind>``: real kernels (or real
  compiles, for the stand-in) in an isolated bench process (``subprocess_backend``);
* ``replay:<file>``: answers from a recorded Kernel Tuner cache file (``replay``);
* ``model:<gpu kind>``: the kernel's analytic prediction (``model``).

``BACKENDS.register(scheme, factory)`` adds one without editing any caller.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from typing import Protocol

from tuner.core.registry import Registry
from tuner.core.target import as_target
from tuner.measure.backends.base import Backend
from tuner.measure.backends.model import ModelBackend
from tuner.measure.backends.replay import ReplayBackend
from tuner.measure.backends.subprocess_backend import SubprocessBackend


class BackendFactory(Protocol):
    def __call__(self, name: str, *, cache_dir: Path | None, kernel_roots: tuple[Path, ...],
                 memory_bytes: int | None = None, tenant: str | None = None) -> Backend: ...


BACKENDS: Registry[BackendFactory] = Registry("backend", {
    "interpret": SubprocessBackend, "cuda": SubprocessBackend, "standin": SubprocessBackend,
    "replay": ReplayBackend, "model": ModelBackend,
})


def make_backend(name: str, *, cache_dir: Path | None = None,
                 kernel_roots: tuple[Path, ...] = (), memory_bytes: int | None = None,
                 tenant: str | None = None) -> Backend:
    """The backend ``name`` (``ValueError`` for an unknown scheme or a malformed name);
    ``memory_bytes``: the host-memory cap of its bench processes, if it has any;
    ``tenant``: the one tenant its processes serve (default: each request's job)."""
    scheme = name.split(":", 1)[0]
    factory = BACKENDS.get(scheme)  # an unknown scheme: the message lists the registered ones
    as_target(name)  # a malformed argument: ``BadTarget`` (a ``ValueError``) says what fits
    extra: dict[str, Any] = {} if memory_bytes is None else {"memory_bytes": memory_bytes}
    if tenant is not None:
        extra["tenant"] = tenant
    return factory(name, cache_dir=cache_dir, kernel_roots=kernel_roots, **extra)
