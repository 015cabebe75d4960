"""A fake CUDA GPU for the conformance kit: the service's real CUDA device code
(``tuner.measure.devices.hardware.CudaDevice``, ``tuner.measure.timing``) driven by a simulated
runtime,
so the timing loop, its statistics and the provenance are checked without a GPU.

``FakeCudaDevice`` is a ``CudaDevice`` whose runtime (``torch.cuda``'s ``is_available``,
``init``, ``get_device_properties``, ``synchronize``, ``Event``) keeps a simulated clock and a
log of every operation: L2 flushes, event records, kernel launches, synchronisations and
elapsed-time reads. A launch runs the real kernel (on CPU tensors, under Triton's interpreter)
and then advances the clock by a known duration, so the samples a timing loop should report are
known exactly. An event's elapsed time can only be read once a ``synchronize`` followed both
records, as with CUDA.

``timing_samples(log)`` checks the order of the timing loop — every single-call sample is a
flush, a record, one launch and a record, with the flush outside the timed region — and returns
the durations of those samples.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tuner.core.types import BenchmarkRequest
from tuner.core.types import Confirmation
from tuner.core.types import Measurement
from tuner.core.types import TimingSettings
from tuner.measure.bench import run_confirmation
from tuner.measure.bench import run_request
from tuner.measure.devices.hardware import CudaDevice

#: What the fake reports: an H100 SXM, with datasheet-like ceilings.
FAKE_NAME = "NVIDIA H100 80GB HBM3"
FAKE_UUID = "GPU-00000000-fake-cuda-0000-000000000000"
FAKE_DRIVER = "550.54.15"
FAKE_CEILINGS: dict[str, Any] = {"bandwidth_gbps": 3000.0,
                                 "tflops": {"fp32": 50.0, "fp16": 700.0, "bf16": 700.0},
                                 "method": "fake: not measured"}
FAKE_CLOCKS: dict[str, Any] = {"sm_clock_mhz": 1980, "mem_clock_mhz": 2619,
                               "temperature_c": 41, "power_w": 350.0, "throttle_reasons": 0}
#: Simulated time of a flush of the L2 (ms): outside the timed region, it must not show up.
FLUSH_MS = 0.05


class TimingLoopError(AssertionError):
    """The timing loop broke a rule of CUDA event timing."""


@dataclass
class Op:
    """One logged operation: ``kind`` is flush, record, launch, sync or elapsed."""

    kind: str
    event: int | None = None
    end_event: int | None = None
    duration_ms: float | None = None
    label: str = ""


@dataclass
class FakeClock:
    now_ms: float = 0.0
    log: list[Op] = field(default_factory=list)


class FakeEvent:
    """A CUDA event on the simulated clock."""

    _ids = itertools.count()

    def __init__(self, clock: FakeClock, enable_timing: bool = False) -> None:
        self.clock = clock
        self.enable_timing = enable_timing
        self.id = next(self._ids)
        self.time_ms: float | None = None
        self.complete = False

    def record(self, stream: Any = None) -> None:
        self.time_ms = self.clock.now_ms
        self.complete = False
        self.clock.log.append(Op("record", self.id))

    def elapsed_time(self, end: FakeEvent) -> float:
        if not (self.enable_timing and end.enable_timing):
            raise TimingLoopError("elapsed_time needs events created with enable_timing=True")
        if self.time_ms is None or end.time_ms is None:
            raise TimingLoopError("elapsed_time of an event that was never recorded")
        if not (self.complete and end.complete):
            raise TimingLoopError("elapsed_time read before a synchronize completed the events")
        self.clock.log.append(Op("elapsed", self.id, end.id, end.time_ms - self.time_ms))
        return end.time_ms - self.time_ms


class FakeCudaRuntime:
    """The subset of ``torch.cuda`` that ``CudaDevice`` and ``tuner.measure.timing`` use."""

    def __init__(self, clock: FakeClock, name: str = FAKE_NAME) -> None:
        self.clock = clock
        self.name = name
        self._events: list[FakeEvent] = []

    def is_available(self) -> bool:
        return True

    def init(self) -> None:
        return None

    def get_device_properties(self, index: int) -> Any:
        return SimpleNamespace(name=self.name, major=9, minor=0, multi_processor_count=132,
                               L2_cache_size=50 * 1024 * 1024, uuid=FAKE_UUID,
                               total_memory=80 * 1024**3)

    def synchronize(self) -> None:
        self.clock.log.append(Op("sync"))
        for event in self._events:
            if event.time_ms is not None:
                event.complete = True

    def Event(self, enable_timing: bool = False) -> FakeEvent:
        event = FakeEvent(self.clock, enable_timing)
        self._events.append(event)
        return event


class FakeFlushBuffer:
    """The L2 flush buffer: ``zero_`` logs a flush and takes ``FLUSH_MS``."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def zero_(self) -> FakeFlushBuffer:
        self.clock.log.append(Op("flush"))
        self.clock.now_ms += FLUSH_MS
        return self


class FakeNvml:
    def driver_version(self) -> str:
        return FAKE_DRIVER

    def snapshot(self) -> dict[str, Any]:
        return dict(FAKE_CLOCKS)


class FakeCudaDevice(CudaDevice):
    """``CudaDevice`` on the fake runtime. Kernels run on CPU tensors (``torch_device`` is
    ``cpu``; set ``TRITON_INTERPRET=1``); each launch takes a simulated duration around
    ``base_ms`` (seeded jitter), and the n-th distinct callable timed together with others
    (an interleaved confirmation) takes ``base_ms · (1 + n / 2)``, so mixing them up shows."""

    torch_device = "cpu"

    def __init__(self, base_ms: float = 0.25, jitter: float = 0.1, seed: int = 0) -> None:
        self.clock = FakeClock()
        self.base_ms = base_ms
        self.jitter = jitter
        self.rng = random.Random(seed)
        super().__init__(None, cuda=FakeCudaRuntime(self.clock), nvml=FakeNvml())

    def measure_ceilings(self, cache_dir: Path | None) -> dict[str, Any]:
        return dict(FAKE_CEILINGS)

    def flush_buffer(self, nbytes: int) -> Any:
        return FakeFlushBuffer(self.clock)

    def kernel(self, fn: Callable[[], object], base_ms: float, label: str) -> Callable[[], None]:
        """``fn`` as a launch on the fake GPU: it runs, then the clock advances."""
        def launch() -> None:
            fn()
            duration = base_ms * (1.0 + self.jitter * self.rng.uniform(-1.0, 1.0))
            self.clock.log.append(Op("launch", duration_ms=duration, label=label))
            self.clock.now_ms += duration

        return launch

    def time(self, fn: Callable[[], object], settings: TimingSettings) -> list[float]:
        return super().time(self.kernel(fn, self.base_ms, "0"), settings)

    def time_interleaved(self, fns: list[Callable[[], object]],
                         settings: TimingSettings) -> list[list[float]]:
        launches = [self.kernel(fn, self.base_ms * (1.0 + i / 2), str(i))
                    for i, fn in enumerate(fns)]
        return super().time_interleaved(list(launches), settings)


@dataclass(frozen=True)
class Sample:
    """A single-call timed sample: the launch it bracketed and the elapsed time read."""

    label: str
    duration_ms: float
    elapsed_ms: float


def timing_samples(log: Sequence[Op], flush_l2: bool = True) -> list[Sample]:
    """Check the timing loop in ``log`` and return its single-call samples, in read order.

    Every elapsed-time read must follow a synchronize that follows both of its records. A read
    whose two records bracket exactly one launch is a sample: nothing but that launch may lie
    between the records (the flush, when ``flush_l2``, comes right before the first record),
    and the elapsed time must be the launch's duration. Raises ``TimingLoopError``.
    """
    where = {op.event: i for i, op in enumerate(log) if op.kind == "record"}
    samples = []
    for i, op in enumerate(log):
        if op.kind != "elapsed":
            continue
        start, end = where.get(op.event), where.get(op.end_event)
        if start is None or end is None or not start < end < i:
            raise TimingLoopError(f"elapsed read #{i} does not follow its two records")
        if not any(o.kind == "sync" for o in log[end + 1:i]):
            raise TimingLoopError(f"elapsed read #{i} without a synchronize after its records")
        inside = log[start + 1:end]
        launches = [o for o in inside if o.kind == "launch"]
        if len(launches) != 1:
            continue  # a multi-call estimate window, not a sample
        if len(inside) != 1:
            raise TimingLoopError(f"sample #{i} times {[o.kind for o in inside]}, not one "
                                  "launch alone")
        if flush_l2 and (start == 0 or log[start - 1].kind != "flush"):
            raise TimingLoopError(f"sample #{i} is not preceded by an L2 flush")
        (launch,) = launches
        assert launch.duration_ms is not None and op.duration_ms is not None
        if abs(op.duration_ms - launch.duration_ms) > 1e-9:
            raise TimingLoopError(f"sample #{i} reads {op.duration_ms} ms for a launch of "
                                  f"{launch.duration_ms} ms")
        samples.append(Sample(launch.label, launch.duration_ms, op.duration_ms))
    return samples


class FakeCudaBackend:
    """The ``cuda`` backend's work on a ``FakeCudaDevice``, in this process (a ``Backend``):
    the bench code (``tuner.measure.bench``) measures, checks and re-times exactly as in a bench
    process; only the GPU is simulated. ``device.clock.log`` holds what it did."""

    name = "cuda"

    def __init__(self, kernel_roots: tuple[Path, ...] = (), **device_options: Any) -> None:
        self.kernel_roots = kernel_roots
        self.device_options = device_options
        self._device: FakeCudaDevice | None = None

    @property
    def device(self) -> FakeCudaDevice:
        self.start()
        assert self._device is not None
        return self._device

    def start(self) -> None:
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError("the fake GPU runs kernels under Triton's interpreter: set "
                               "TRITON_INTERPRET=1 before Triton is imported")
        if self._device is None:
            self._device = FakeCudaDevice(**self.device_options)

    def run(self, request: BenchmarkRequest) -> Measurement:
        return run_request(self.device, request, self.kernel_roots, lambda s: None).measurement

    def confirm(self, request: BenchmarkRequest) -> Confirmation:
        return Confirmation.from_json(run_confirmation(self.device, request,
                                                       self.kernel_roots))

    def describe(self) -> dict[str, Any]:
        return {**self.device.describe(), "ceilings": self.device.ceilings()}

    def close(self) -> None:
        self._device = None
