"""The two narrow interfaces of measurement (DESIGN.md decision 9).

* A **backend** (a runner) turns a ``BenchmarkRequest`` into a ``Measurement`` and re-times a
  request's finalists interleaved (``Confirmation``); it never raises for a bad config:
  failures are statuses. ``describe`` returns what the worker announces about its device
  (name, kind, ceilings). One implementation per target scheme (``tuner.core.target``).
* A **builder** compiles a config for a GPU kind without running it and returns a
  ``StaticResult`` (registers, spills, shared memory, or why it cannot launch). A pool of them
  feeds a GPU's backend in a pipelined worker (``tuner.measure.pipeline``) and serves static
  checks.

Neither answers for the other: no runner has a "does not check" stub and no builder a "does
not measure" one. Every implementation passes the conformance kit for the interface it
implements (``tuner.testing.conformance``). This module is the interfaces only;
``tuner.measure.backends.registry`` maps target schemes to backends.
"""

from __future__ import annotations

from typing import Any
from typing import Protocol

from tuner.core.types import BenchmarkRequest
from tuner.core.types import Confirmation
from tuner.core.types import Measurement
from tuner.core.types import StaticResult


class Backend(Protocol):
    """Measures on one device (a runner)."""

    name: str

    def start(self) -> None:
        """Get ready (spawn and calibrate); raises if the backend cannot run here."""

    def run(self, request: BenchmarkRequest) -> Measurement: ...

    def confirm(self, request: BenchmarkRequest) -> Confirmation: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class Builder(Protocol):
    """Compiles for one GPU kind without a GPU."""

    kind: str

    def start(self) -> None:
        """Get ready; raises ``BenchStartError`` if no compile process can start."""

    def check(self, request: BenchmarkRequest, inspect: bool = True) -> StaticResult:
        """Compile ``request`` for ``kind`` (compile timeout); ``inspect=False``: compile only,
        without reading registers and spills."""

    def close(self) -> None: ...
