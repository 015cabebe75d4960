"""Real kernels in an isolated process: the ``interpret``, ``cuda[:N]`` and ``standin:<kind>``
backends (``SubprocessBackend``), and the compile-only builder for a GPU kind
(``CompileBuilder``).

``standin:<kind>`` compiles for real and simulates the device time
(``tuner.measure.devices.standin``:
benchmarks and tests of the pipeline). A builder compiles configs for its kind without a GPU
and reads their registers, spills and shared memory (``tuner.measure.static_check``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.core.target import Evidence
from tuner.core.target import as_target
from tuner.core.target import gpu_kinds
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Confirmation
from tuner.core.types import Measurement
from tuner.core.types import StaticResult
from tuner.measure.bench_process import BenchProcess


class SubprocessBackend:
    """A ``BenchProcess`` per backend instance; one instance serves one trial at a time."""

    def __init__(self, name: str, *, cache_dir: Path | None = None,
                 kernel_roots: tuple[Path, ...] = (), memory_bytes: int | None = None,
                 tenant: str | None = None) -> None:
        target = as_target(name)  # ``BadTarget`` (a ``ValueError``) for a malformed name
        if target.evidence not in (Evidence.MEASURED, Evidence.SIMULATED):
            raise ValueError(f"the {name} backend runs no bench process")
        self.name = name
        self.process = BenchProcess(name, cache_dir=cache_dir, kernel_roots=kernel_roots,
                                    memory_bytes=memory_bytes, tenant=tenant)

    def start(self) -> None:
        self.process.start()

    def run(self, request: BenchmarkRequest) -> Measurement:
        return self.process.run(request)

    def confirm(self, request: BenchmarkRequest) -> Confirmation:
        return self.process.confirm(request)

    def describe(self) -> dict[str, Any]:
        return {**self.process.device, "ceilings": self.process.ceilings,
                "restarts": self.process.restarts}

    def close(self) -> None:
        self.process.close()


class CompileBuilder:
    """One compile-only process for GPU ``kind`` (a datasheet kind; ``ValueError`` for
    another); one check at a time."""

    def __init__(self, kind: str, *, cache_dir: Path | None = None,
                 kernel_roots: tuple[Path, ...] = (), memory_bytes: int | None = None,
                 tenant: str | None = None) -> None:
        if kind not in gpu_kinds():
            raise ValueError(f"no datasheet entry for {kind!r}: cannot compile for it "
                             f"(known: {', '.join(gpu_kinds())})")
        self.kind = kind
        self.process = BenchProcess(compile_for=kind, cache_dir=cache_dir,
                                    kernel_roots=kernel_roots, memory_bytes=memory_bytes,
                                    tenant=tenant)

    def start(self) -> None:
        self.process.start()

    def check(self, request: BenchmarkRequest, inspect: bool = True) -> StaticResult:
        return self.process.check(request, inspect=inspect)

    def close(self) -> None:
        self.process.close()
