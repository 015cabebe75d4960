"""``standin:<kind>``: a stand-in GPU, to measure the worker's pipeline on a host without one.

SIMULATED DEVICE TIME, REAL COMPILES. Every config is compiled for the kind's target by Triton
(``static_check``'s compile-only driver), through the host's Triton cache, exactly when
a real bench process compiles: on its first call. The device is not real: instead of running
the kernel, the stand-in holds its "device" (sleeps) for as long as a real GPU's timing loop
takes, the request's warm-up plus timing budget (``TimingSettings``, ``do_bench`` semantics),
and reports the kernel's analytic model time (``model:<kind>``) as its median, or the roofline
bound when the kernel has no model (a config the model predicts cannot fit keeps that
failure). Its results are marked ``predicted`` (never offered to a best-config lookup) and
carry ``provenance["simulated"]``. There is no correctness check: there is no data.

``benchmarks/gpu_busy.py`` and the pipeline's tests use it; users try it with ``tuner tune
--backend standin:<kind>`` or ``tuner worker --device standin:<kind>``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.core.roofline import datasheet_ceilings
from tuner.core.roofline import roof
from tuner.core.types import MEASURED_STATUSES
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Measurement
from tuner.core.types import TrialStatus
from tuner.measure.backends.model import ModelBackend
from tuner.measure.static_check import CompileDevice

SIMULATED = "stand-in device: real Triton compiles for the target; device time simulated " \
            "(held for the timing budget), median from the analytic model or the roofline"


def hold_seconds(request: BenchmarkRequest) -> float:
    """How long a real GPU's check and timing loop would hold the device: the warm-up plus
    timing budget of the request (s)."""
    return max(0.0, (request.timing.warmup_ms + request.timing.rep_ms) / 1000.0)


class StandInDevice:
    """Compiles for ``kind`` for real, then holds the device for ``hold_seconds``."""

    def __init__(self, kind: str, roots: tuple[Path, ...]) -> None:
        self.kind = kind
        self.compiler = CompileDevice(kind)
        self.model = ModelBackend(f"model:{kind}", kernel_roots=roots)

    def describe(self) -> dict[str, Any]:
        return {**self.compiler.describe(), "device_name": f"stand-in {self.kind} (simulated)",
                "backend": "standin", "simulated": SIMULATED}

    def run(self, request: BenchmarkRequest, roots: tuple[Path, ...],
            on_compiled: Callable[[float | None], None]) -> Measurement:
        start = time.perf_counter()
        result = self.compiler.check(request, roots, inspect=False)
        first_call_s = time.perf_counter() - start
        on_compiled(first_call_s)
        phases: dict[str, Any] = {"first_call_s": first_call_s,
                                  "device_cache_hit": result.cache_hit}
        base: dict[str, Any] = {"device_kind": self.kind, "predicted": True,
                                "compile_s": first_call_s, "phases": phases,
                                "provenance": {**self.describe(), "prediction": True}}
        if result.status not in ("ok", "spills"):
            status = result.status if result.status in {str(s) for s in MEASURED_STATUSES} \
                else str(TrialStatus.CRASHED)
            return Measurement.failure(TrialStatus(status), result.error or result.status,
                                       **base)
        hold = hold_seconds(request)
        time.sleep(hold)
        phases.update(check_s=0.0, timing_s=hold)
        predicted = self.model.run(request)
        if predicted.status == TrialStatus.CRASHED and predicted.flops is not None \
                and predicted.min_bytes:
            # no analytic model (or none for this config): the roofline stands in for it
            sheet = datasheet_ceilings(self.kind)
            assert sheet is not None  # CompileDevice accepted the kind: it is in the table
            bound = roof(predicted.flops, predicted.min_bytes,
                         sheet.peak(predicted.compute_dtype or ""), sheet.bandwidth_gbps)
            ms = bound.roof_ms
            predicted = dataclasses.replace(predicted, status=str(TrialStatus.OK), error=None,
                                            median_ms=ms, p20_ms=ms, p80_ms=ms, min_ms=ms, n=1,
                                            cv=0.0)
        return dataclasses.replace(predicted, **base)
