"""Where a trial runs: one interface for every backend (DESIGN.md decision 9).

A backend turns a ``BenchmarkRequest`` into a ``Measurement`` and never raises for a bad
config: failures are statuses. ``describe`` returns what the worker announces about its device
(name, kind, ceilings). ``confirm`` re-times a request's finalists interleaved; ``check``
compiles a config for a GPU target without running it (only ``compile:<kind>`` backends do).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from typing import Protocol

from tuner.core.types import BenchmarkRequest
from tuner.core.types import Measurement
from tuner.core.types import StaticResult


class Backend(Protocol):
    name: str

    def start(self) -> None:
        """Get ready (spawn and calibrate); raises if the backend cannot run here."""

    def run(self, request: BenchmarkRequest) -> Measurement: ...

    def confirm(self, request: BenchmarkRequest) -> dict[str, Any]:
        """``{"timings": [{"trial_id", "median_ms", "n"}, …]}`` or ``{"error": …}``."""

    def check(self, request: BenchmarkRequest) -> StaticResult: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def make_backend(name: str, *, cache_dir: Path | None = None,
                 kernel_roots: tuple[Path, ...] = ()) -> Backend:
    """``interpret`` and ``cuda[:N]`` run in an isolated bench process; ``replay:<file>``
    answers in-process from the recording."""
    from workers.backends.replay import ReplayBackend
    from workers.backends.subprocess_backend import SubprocessBackend

    if name.startswith("replay:"):
        return ReplayBackend(name)
    if name.startswith("model:"):
        from workers.backends.model import ModelBackend

        return ModelBackend(name)
    if name.startswith("compile:"):
        return SubprocessBackend(name, cache_dir=cache_dir, kernel_roots=kernel_roots)
    if name == "interpret" or name == "cuda" or name.startswith("cuda:"):
        return SubprocessBackend(name, cache_dir=cache_dir, kernel_roots=kernel_roots)
    raise ValueError(f"unknown backend {name!r} (interpret, cuda[:N], replay:<file>, "
                     "model:<gpu kind> or compile:<gpu kind>)")
