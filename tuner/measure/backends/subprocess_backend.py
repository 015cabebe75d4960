"""``interpret``, ``cuda[:N]``, ``compile:<kind>`` and ``standin:<kind>``: real kernels in an
isolated process.

The first two measure; ``compile:<kind>`` only statically checks configs for that GPU kind
(asked to measure, it answers a failure at once); ``standin:<kind>`` compiles for real and
simulates the device time (``tuner.measure.standin``: benchmarks and tests of the pipeline).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tuner.core.types import BenchmarkRequest
from tuner.core.types import Measurement
from tuner.core.types import StaticResult
from tuner.core.types import TrialStatus
from tuner.measure.bench_process import BenchProcess

NAMES = re.compile(r"interpret|cuda(:\d+)?|compile:[\w.-]+|standin:[\w.-]+")


class SubprocessBackend:
    """A ``BenchProcess`` per backend instance; one instance serves one trial at a time."""

    def __init__(self, name: str, *, cache_dir: Path | None = None,
                 kernel_roots: tuple[Path, ...] = (), memory_bytes: int | None = None,
                 tenant: str | None = None) -> None:
        if not NAMES.fullmatch(name):
            raise ValueError(f"malformed backend {name!r} (interpret, cuda, cuda:N, "
                             "compile:<gpu kind> or standin:<gpu kind>)")
        self.name = name
        self.checks_only = name.startswith("compile:")
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
        if not self.name.startswith("compile:"):
            return StaticResult(status="crashed", target="",
                                error=f"the {self.name} backend does not check statically")
        return self.process.check(request)

    def describe(self) -> dict[str, Any]:
        return {**self.process.device, "ceilings": self.process.ceilings,
                "restarts": self.process.restarts}

    def close(self) -> None:
        self.process.close()
