"""``model:<gpu kind>``: an analytic *prediction* of a config's time, never a measurement.

Answers in-process from the kernel's model (``KernelSpec.model``; the matmul has one) and the
GPU kind's datasheet. Every result is marked ``predicted`` and scored on the ``predicted``
basis; the driver never offers a predicted result to the best-config table, so lookups cannot
serve it. Use it to rank or seed candidates, or to see what a model believes before a GPU run.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tuner.core.devices.datasheets import device_spec
from tuner.core.target import as_target
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Confirmation
from tuner.core.types import Measurement
from tuner.core.types import Retiming
from tuner.core.types import TrialStatus
from tuner.kernels import KernelError
from tuner.kernels import load_kernel


class ModelBackend:
    def __init__(self, name: str, *, cache_dir: Path | None = None,
                 kernel_roots: tuple[Path, ...] = (), memory_bytes: int | None = None,
                 tenant: str | None = None) -> None:  # no process: nothing to isolate
        self.name = name
        self.kernel_roots = kernel_roots
        self.kind = as_target(name).gpu_kind or ""
        spec = device_spec(self.kind)
        if spec is None:
            raise ValueError(f"model backend needs a datasheet GPU kind, not {self.kind!r}")
        self.spec = spec

    def start(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"device_name": f"model of {self.spec.marketing_name}", "device_kind": self.kind,
                "backend": "model"}

    def predict(self, request: BenchmarkRequest, params: dict[str, Any]) -> float | str:
        """The predicted time (ms), or why there is none (a string)."""
        try:
            kernel = load_kernel(request.kernel, self.kernel_roots)
        except KernelError as exc:
            return str(exc)
        if kernel.model is None:
            return f"kernel {kernel.name} has no analytic model"
        try:
            return float(kernel.model(request.problem, request.dtype, params, self.spec, None))
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            return f"the model cannot rate this config: {type(exc).__name__}: {exc}"

    def run(self, request: BenchmarkRequest) -> Measurement:
        try:
            kernel = load_kernel(request.kernel, self.kernel_roots)
        except KernelError as exc:
            return Measurement.failure(TrialStatus.COMPILE_ERROR, str(exc),
                                       device_kind=self.kind, predicted=True)
        base: dict[str, Any] = {
            "device_kind": self.kind, "flops": kernel.flops(request.problem, request.dtype),
            "min_bytes": kernel.min_bytes(request.problem, request.dtype),
            "compute_dtype": kernel.compute_dtype(request.dtype), "predicted": True,
            "provenance": {"backend": "model", "prediction": True, "device_kind": self.kind,
                           "device_name": self.spec.marketing_name}}
        ms = self.predict(request, request.params)
        if isinstance(ms, str):
            return Measurement.failure(TrialStatus.CRASHED, ms, **base)
        if not math.isfinite(ms):
            return Measurement.failure(TrialStatus.OUT_OF_RESOURCES,
                                       "predicted not to fit one SM (shared memory, registers "
                                       "or warps)", **base)
        return Measurement(status=str(TrialStatus.OK), median_ms=ms, p20_ms=ms, p80_ms=ms,
                           min_ms=ms, n=1, cv=0.0, **base)

    def confirm(self, request: BenchmarkRequest) -> Confirmation:
        timings = []
        for finalist in request.finalists or []:
            ms = self.predict(request, dict(finalist["params"]))
            if isinstance(ms, str):
                return Confirmation.failed(ms)
            timings.append(Retiming(int(finalist["trial_id"]), ms, 1))
        return Confirmation(tuple(timings))

    def close(self) -> None:
        return None
