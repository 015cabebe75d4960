"""The device a bench process measures on: the host CPU (Triton interpreter) or one CUDA GPU.

Each device knows how to time a call, how to describe itself (provenance recorded with every
measurement), its measured ceilings, and which errors leave it unusable (a sticky CUDA error
poisons the context for good: the bench process must exit and be replaced).
"""

from __future__ import annotations

import platform
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import Protocol

import torch
import triton

from tuner.core.devices.datasheets import CPU_KIND
from tuner.core.devices.datasheets import normalise_device_name
from tuner.core.target import as_target
from tuner.core.types import TimingSettings
from tuner.measure.calibrate import cached_ceilings
from tuner.measure.timing import time_cpu
from tuner.measure.timing import time_cuda
from tuner.measure.timing import time_interleaved_cpu
from tuner.measure.timing import time_interleaved_cuda

#: Substrings of CUDA errors after which the context cannot be used again.
STICKY_CUDA_ERRORS = (
    "illegal memory access", "unspecified launch failure", "misaligned address",
    "device-side assert", "illegal instruction", "CUDA error", "Triton Error [CUDA]",
)


class BenchDevice(Protocol):
    torch_device: str
    kind: str

    def describe(self) -> dict[str, Any]: ...

    def ceilings(self) -> dict[str, Any]: ...

    def sync(self) -> None: ...

    def time(self, fn: Callable[[], object], settings: TimingSettings) -> list[float]: ...

    def time_interleaved(self, fns: list[Callable[[], object]],
                         settings: TimingSettings) -> list[list[float]]: ...

    def trial_provenance(self) -> dict[str, Any]: ...

    def is_fatal(self, exc: BaseException) -> bool: ...


def _versions() -> dict[str, Any]:
    return {
        "triton": triton.__version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": socket.gethostname(),
    }


def cpu_model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class CpuDevice:
    """The host CPU running kernels under ``TRITON_INTERPRET=1``; kind ``cpu``."""

    torch_device = "cpu"
    kind = CPU_KIND

    def __init__(self, cache_dir: Path | None) -> None:
        self._name = cpu_model_name()
        self._ceilings = cached_ceilings("cpu", self._name, cache_dir)

    def describe(self) -> dict[str, Any]:
        return {"device_name": self._name, "device_kind": self.kind, "backend": "interpret",
                "threads": torch.get_num_threads(), **_versions()}

    def ceilings(self) -> dict[str, Any]:
        return self._ceilings

    def sync(self) -> None:
        return None

    def time(self, fn: Callable[[], object], settings: TimingSettings) -> list[float]:
        return time_cpu(fn, settings)

    def time_interleaved(self, fns: list[Callable[[], object]],
                         settings: TimingSettings) -> list[list[float]]:
        return time_interleaved_cpu(fns, settings)

    def trial_provenance(self) -> dict[str, Any]:
        return {}

    def is_fatal(self, exc: BaseException) -> bool:
        return False


class CudaDevice:
    """GPU 0 of this process (the parent pins it with ``CUDA_VISIBLE_DEVICES``).

    ``cuda`` is the runtime it drives (default ``torch.cuda``: ``is_available``, ``init``,
    ``get_device_properties``, ``synchronize``, ``Event``) and ``nvml`` its reader of driver,
    clocks and temperature; with ``measure_ceilings`` and ``flush_buffer`` they are the seams
    through which the conformance kit's fake GPU (``tuner.testing.fake_cuda``) runs this very
    code, timing loop included, without a GPU.
    """

    torch_device = "cuda"

    def __init__(self, cache_dir: Path | None, cuda: Any = None, nvml: Any = None) -> None:
        self.cuda = torch.cuda if cuda is None else cuda
        if not self.cuda.is_available():
            raise RuntimeError("the cuda backend needs a CUDA GPU, and torch sees none")
        self.cuda.init()
        self._props = self.cuda.get_device_properties(0)
        self.kind = normalise_device_name(self._props.name)
        self._nvml = _Nvml(str(getattr(self._props, "uuid", "") or "")) if nvml is None \
            else nvml
        self._ceilings = self.measure_ceilings(cache_dir)
        l2 = int(getattr(self._props, "L2_cache_size", 0) or 50 * 1024 * 1024)
        self._flush = self.flush_buffer(max(2 * l2, 64 * 1024 * 1024))

    def measure_ceilings(self, cache_dir: Path | None) -> dict[str, Any]:
        """Copy bandwidth and matmul peaks of this GPU (``tuner.measure.calibrate``, cached)."""
        return cached_ceilings("cuda", self._props.name, cache_dir)

    def flush_buffer(self, nbytes: int) -> Any:
        """A buffer of ``nbytes`` on the GPU, zeroed before every timed call (flushes L2)."""
        return torch.empty(nbytes // 4, dtype=torch.int32, device="cuda")

    def describe(self) -> dict[str, Any]:
        p = self._props
        return {
            "device_name": p.name, "device_kind": self.kind, "backend": "cuda",
            "compute_capability": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count,
            "l2_bytes": getattr(p, "L2_cache_size", None), "uuid": str(getattr(p, "uuid", "")),
            "memory_bytes": p.total_memory, "driver": self._nvml.driver_version(),
            **_versions(),
        }

    def ceilings(self) -> dict[str, Any]:
        return self._ceilings

    def sync(self) -> None:
        self.cuda.synchronize()

    def time(self, fn: Callable[[], object], settings: TimingSettings) -> list[float]:
        return time_cuda(fn, settings, self._flush if settings.flush_l2 else None, self.cuda)

    def time_interleaved(self, fns: list[Callable[[], object]],
                         settings: TimingSettings) -> list[list[float]]:
        return time_interleaved_cuda(fns, settings, self._flush if settings.flush_l2 else None,
                                     self.cuda)

    def trial_provenance(self) -> dict[str, Any]:
        return self._nvml.snapshot()

    def is_fatal(self, exc: BaseException) -> bool:
        text = str(exc)
        return any(s in text for s in STICKY_CUDA_ERRORS)


def nvml_uuid(torch_uuid: str) -> str | None:
    """NVML's name of the GPU whose CUDA UUID is ``torch_uuid`` (``GPU-…``; MIG names kept)."""
    text = torch_uuid.strip()
    if not text:
        return None
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


class _Nvml:
    """Clocks, temperature, power and throttle reasons through NVML, when it is readable.

    The GPU is found by its UUID: NVML ignores ``CUDA_VISIBLE_DEVICES``, so NVML's index 0 is
    the host's first GPU, not this process's. Without a UUID nothing is read (partial
    provenance, never another GPU's). ``module``: the NVML binding (default ``pynvml``)."""

    def __init__(self, torch_uuid: str, module: Any = None) -> None:
        self._handle: Any = None
        uuid = nvml_uuid(torch_uuid)
        try:
            if module is None:
                import pynvml

                module = pynvml
            module.nvmlInit()
            self._pynvml = module
            if uuid is not None:
                self._handle = module.nvmlDeviceGetHandleByUUID(uuid)
        except Exception:  # no NVML (container without the library): provenance is partial
            self._handle = None

    def driver_version(self) -> str | None:
        if self._handle is None:
            return None
        try:
            return str(self._pynvml.nvmlSystemGetDriverVersion())
        except Exception:
            return None

    def snapshot(self) -> dict[str, Any]:
        if self._handle is None:
            return {}
        n, h = self._pynvml, self._handle
        out: dict[str, Any] = {}
        readings: dict[str, Callable[[], Any]] = {
            "sm_clock_mhz": lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
            "temperature_c": lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
            "power_w": lambda: n.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "throttle_reasons": lambda: n.nvmlDeviceGetCurrentClocksEventReasons(h),
        }
        for key, read in readings.items():
            try:
                out[key] = read()
            except Exception:
                continue
        return out


def make_device(backend: str, cache_dir: Path | None) -> BenchDevice:
    """``interpret`` → the CPU; ``cuda`` / ``cuda:N`` → the GPU this process was pinned to."""
    target = as_target(backend)
    if target.is_interpreter:
        return CpuDevice(cache_dir)
    if target.is_cuda:
        return CudaDevice(cache_dir)
    raise ValueError(f"backend {backend!r} has no bench device")
