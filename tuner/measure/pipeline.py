"""Keep the device measuring: configs are compiled ahead in a pool of CPU processes.

A serial worker compiles a config inside its bench process on the first call, so the GPU waits
for every compile. A ``PipelinedBackend`` wraps the device's backend (``cuda:N``, or the
simulated ``standin:<kind>``) with a ``CompilePool`` of compile-only processes for its kind: while
config *i* holds the device, the threads that carry configs *i+1 … i+k* compile them for the
device's target (Triton's compile-only driver) into the Triton cache of the job they serve,
which its bench and compile processes share and no other job can write (``TRITON_CACHE_DIR`` =
``<cache dir>/sandbox/<tenant>/triton``, ``tuner.core.isolation``); the device's first call
then loads the binary instead of compiling it. A config that fails to compile
(``compile_error``, ``out_of_resources``, ``timeout``) never reaches the device. When the
compile-only process itself cannot compile a kernel (``crashed``: e.g. it needs a real device
to launch) or cannot start, the device compiles it as a serial worker would, and ``phases``
says so (``compile_fallback``).

Static checks (``mode="check"``) of the same worker go through the same pool and the same
Triton cache: within a job, a config is compiled once per (kernel source, config, target,
Triton version), the key of Triton's cache. Callers run ``run`` from ``2 + size`` threads
(one on the device, one compiled and waiting, the rest compiling; ``tuner.app.local``, or a
Celery worker with a thread pool); the device takes one request at a time, whichever
finished compiling first.

Every measurement's ``phases`` gain ``pipelined``, ``compile_s`` and ``cache_hit`` (of the
pool's compile), ``compile_queue_s`` (waiting for a free compile process),
``compile_start``/``compile_end`` (unix seconds) and ``device_wait_s`` (compiled → device
free).
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.core.types import BenchmarkRequest
from tuner.core.types import Confirmation
from tuner.core.types import Measurement
from tuner.core.types import StaticResult
from tuner.core.types import TrialStatus
from tuner.measure.backends.base import Backend
from tuner.measure.backends.base import Builder
from tuner.measure.backends.subprocess_backend import CompileBuilder
from tuner.measure.bench_process import BenchStartError

#: Compile statuses after which a config must not reach the device.
#: Static results that end a trial before the device: it could not launch (or may not).
NOT_LAUNCHABLE = ("compile_error", "out_of_resources", "timeout", "invalid")


@dataclass(frozen=True)
class Pipeline:
    """How one GPU's work is pipelined: ``compile_procs`` compile-only processes feed its
    device (0: serial, the device compiles each config itself). The rest derives from it."""

    compile_procs: int = 0

    @property
    def lookahead(self) -> int:
        """Trials in flight beyond the one on the device: one compiling in each process and
        one compiled, waiting for the device (``JobSpec.lookahead`` of a local job)."""
        return self.compile_procs + 1 if self.compile_procs > 0 else 0

    @property
    def threads(self) -> int:
        """Worker threads that share the device (each holds one trial): ``1 + lookahead``.
        A trial's lease covers this many runs on the device."""
        return 1 + self.lookahead

    @classmethod
    def from_lookahead(cls, lookahead: int) -> Pipeline:
        """The pipeline a local job's ``lookahead`` stands for (at least one compile process
        when it is positive)."""
        return cls(max(1, lookahead - 1) if lookahead > 0 else 0)


def default_compile_procs(gpus: int = 1, cores: int | None = None) -> int:
    """Compile processes per GPU when none are asked for: the host's cores shared among its
    GPUs, less one per GPU for the worker and its bench process; at least 1, at most 8."""
    cores = cores if cores is not None else (os.cpu_count() or 2)
    return max(1, min(8, cores // max(1, gpus) - 1))


class CompilePool:
    """``size`` compile-only processes for one GPU kind, lent to one caller at a time: a
    builder (``check``) that compiles ``size`` configs at once."""

    def __init__(self, kind: str, size: int, *, cache_dir: Path | None = None,
                 kernel_roots: tuple[Path, ...] = (), memory_bytes: int | None = None,
                 tenant: str | None = None) -> None:
        if size < 1:
            raise ValueError("a compile pool needs at least one process")
        self.kind = kind
        self.size = size
        self._procs = [CompileBuilder(kind, cache_dir=cache_dir, kernel_roots=kernel_roots,
                                      memory_bytes=memory_bytes, tenant=tenant)
                       for _ in range(size)]
        self._idle: queue.Queue[CompileBuilder] = queue.Queue()
        for proc in self._procs:
            self._idle.put(proc)

    def start(self) -> None:
        for proc in self._procs:
            proc.start()

    @contextmanager
    def lend(self) -> Iterator[CompileBuilder]:
        """The next free compile process (blocks while all are busy), for one compile."""
        proc = self._idle.get()
        try:
            yield proc
        finally:
            self._idle.put(proc)

    def check(self, request: BenchmarkRequest, inspect: bool = True) -> StaticResult:
        """Compile ``request`` for the pool's kind in the next free process; ``inspect``:
        also read registers and spills (a static check)."""
        with self.lend() as proc:
            return proc.check(request, inspect=inspect)

    def close(self) -> None:
        for proc in self._procs:
            proc.close()


class PipelinedBackend:
    """``device`` fed by ``pool``; thread-safe, one request on the device at a time."""

    def __init__(self, device: Backend, pool: CompilePool) -> None:
        self.name = device.name
        self.device = device
        self.pool = pool
        self._gate = threading.Lock()

    def start(self) -> None:
        self.device.start()
        self.pool.start()

    def run(self, request: BenchmarkRequest) -> Measurement:
        asked = time.perf_counter()
        with self.pool.lend() as proc:
            wall, start = time.time(), time.perf_counter()
            try:
                result = proc.check(request, inspect=False)
            except BenchStartError as exc:  # no compile process: the device compiles
                result = StaticResult(status="crashed", target="", error=str(exc))
            compiled = time.perf_counter()
        phases: dict[str, Any] = {
            "pipelined": True, "compile_s": compiled - start, "cache_hit": result.cache_hit,
            "compile_queue_s": start - asked, "compile_start": wall,
            "compile_end": wall + (compiled - start)}
        if result.status in NOT_LAUNCHABLE:
            kind = self.device.describe().get("device_kind")
            return Measurement.failure(
                TrialStatus(result.status),
                f"[compile for {result.target or self.pool.kind}] {result.error or ''}",
                device_kind=kind, phases=phases)
        if result.status == "crashed":  # the compile-only process cannot: the device will
            phases["compile_fallback"] = (result.error or "")[:300]
        with self._gate:
            phases["device_wait_s"] = time.perf_counter() - compiled
            measurement = self.device.run(request)
        return dataclasses.replace(measurement, phases={**measurement.phases, **phases})

    def confirm(self, request: BenchmarkRequest) -> Confirmation:
        with self._gate:
            return self.device.confirm(request)

    def describe(self) -> dict[str, Any]:
        return {**self.device.describe(), "compile_procs": self.pool.size}

    def close(self) -> None:
        self.device.close()
        self.pool.close()


def worker_backends(name: str, backend: PipelinedBackend) -> dict[str, Backend]:
    """A worker's backends by name (``BackendPool``): its device fed by its compile pool,
    which also serves the static checks for its own kind (``worker_builders``: one pool,
    one Triton cache)."""
    return {name: backend}


def worker_builders(backend: PipelinedBackend) -> dict[str, Builder]:
    """A pipelined worker's builders by GPU kind: its own compile pool."""
    return {backend.pool.kind: backend.pool}
