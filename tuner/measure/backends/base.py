"""Where a trial runs: one interface for every backend (DESIGN.md decision 9).

A backend turns a ``BenchmarkRequest`` into a ``Measurement`` and never raises for a bad
config: failures are statuses. ``describe`` returns what the worker announces about its device
(name, kind, ceilings). ``confirm`` re-times a request's finalists interleaved; ``check``
compiles a config for a GPU target without running it (only ``compile:<kind>`` backends do;
the others answer a non-launchable result at once, as a compile backend answers ``run`` with a
failure). Every implementation passes the conformance kit (``tuner.testing.conformance``).

This module is the interface only; ``tuner.measure.backends.registry`` maps names to
implementations.
"""

from __future__ import annotations

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
