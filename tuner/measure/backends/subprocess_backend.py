"""``interpret``, ``cuda[:N]``, ``compile:<kind>`` and ``standin:<kind>``: real kernels in an
isolated process.

The first two measure; ``compile:<kind>`` only statically checks configs for that GPU kind
(asked to measure, it answers a failure at once); ``standin:<kind>`` compiles for real and
simulates the device time (``tuner.measure.standin``: benchmarks and tests of the pipeline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.core.target import Evidence
from tuner.core.target import as_target
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Measurement
from tuner.core.types import StaticResult
from tuner.core.types import TrialStatus
from tuner.measure.bench_process import BenchProcess


class SubprocessBackend:
    """A ``BenchProcess`` per backend instance; one instance serves one trial at a time."""

    def __init__(self, name: str, *, cache_dir: Path | None = None,
                 kernel_roots: tuple[Path, ...] = (), memory_bytes: int | None = None,
                 tenant: str | None = None) -> None:
        target = as_target(name)  # ``BadTarget`` (a ``ValueError``) for a malformed name
        if target.evidence not in (Evidence.MEASURED, Evidence.SIMULATED, Evidence.NONE):
            raise ValueError(f"the {name} backend runs no bench process")
        self.name = name
        self.checks_only = target.checks_only
        self.process = BenchProcess(name, cache_dir=cache_dir, kernel_roots=kernel_roots,
                                    memory_bytes=memory_bytes, tenant=tenant)

    def start(self) -> None:
        self.process.start()

    def run(self, request: BenchmarkRequest) -> Measurement:
        if self.checks_only:
            return Measurement.failure(TrialStatus.CRASHED,
                                       f"the {self.name} backend checks statically; it does "
                                       "not measure")
        return self.process.run(request)

    def confirm(self, request: BenchmarkRequest) -> dict[str, Any]:
        if self.checks_only:
            return {"error": f"the {self.name} backend checks statically; it does not measure"}
        return self.process.confirm(request)

    def check(self, request: BenchmarkRequest) -> StaticResult:
        if not self.checks_only:
            return StaticResult(status="crashed", target="",
                                error=f"the {self.name} backend does not check statically")
        return self.process.check(request)

    def describe(self) -> dict[str, Any]:
        return {**self.process.device, "ceilings": self.process.ceilings,
                "restarts": self.process.restarts}

    def close(self) -> None:
        self.process.close()
