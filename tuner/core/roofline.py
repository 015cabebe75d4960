"""Roofline scoring (DESIGN.md decision 7): pure arithmetic, no I/O.

``t_roof = max(FLOPs / peak_flops[dtype], min_bytes / bandwidth)`` and
``fraction = t_roof / t_measured``. Peaks in TFLOP/s, bandwidth in GB/s, times in ms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuner.core.devices.datasheets import device_spec
from tuner.core.types import Measurement
from tuner.core.types import Score


@dataclass(frozen=True)
class Ceilings:
    """Compute peaks per dtype (TFLOP/s) and memory bandwidth (GB/s) of one device."""

    tflops: Mapping[str, float]
    bandwidth_gbps: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Ceilings:
        return cls(tflops=dict(data["tflops"]), bandwidth_gbps=float(data["bandwidth_gbps"]))

    def to_json(self) -> dict[str, Any]:
        return {"tflops": dict(self.tflops), "bandwidth_gbps": self.bandwidth_gbps}

    def peak(self, compute_dtype: str) -> float | None:
        return self.tflops.get(compute_dtype)

    def host_peak(self, compute_dtype: str) -> float | None:
        """On a CPU any dtype can be computed at the fastest measured rate (by converting),
        so that rate bounds them all: the ceiling is the largest measured peak."""
        return max(self.tflops.values()) if compute_dtype in self.tflops else None


@dataclass(frozen=True)
class Roof:
    """The roofline bound of one problem on one device."""

    roof_ms: float
    compute_ms: float
    memory_ms: float
    bound: str  # "compute" or "memory"
    intensity: float  # FLOP per byte
    ridge: float | None  # FLOP per byte where both roofs meet


def roof(flops: float, min_bytes: float, peak_tflops: float | None,
         bandwidth_gbps: float, exps: float | None = None,
         exp_per_s: float | None = None) -> Roof:
    """Roofline time of a kernel that must do ``flops`` and move ``min_bytes`` (and, when both
    are given, compute ``exps`` exponentials at ``exp_per_s``: the exp roof of attention).

    A missing compute peak (``None``) means only the memory (and exp) roof applies.
    """
    if min_bytes <= 0 or bandwidth_gbps <= 0:
        raise ValueError("min_bytes and bandwidth must be positive")
    memory_ms = min_bytes / (bandwidth_gbps * 1e9) * 1e3
    compute_ms = 0.0 if not peak_tflops else flops / (peak_tflops * 1e12) * 1e3
    exp_ms = exps / exp_per_s * 1e3 if exps and exp_per_s else 0.0
    ridge = None if not peak_tflops else peak_tflops * 1e12 / (bandwidth_gbps * 1e9)
    bound = "compute" if compute_ms > memory_ms else "memory"
    if exp_ms > max(compute_ms, memory_ms):
        bound = "exp"
    return Roof(max(compute_ms, memory_ms, exp_ms), compute_ms, memory_ms, bound,
                flops / min_bytes, ridge)


def datasheet_ceilings(device_kind: str) -> Ceilings | None:
    spec = device_spec(device_kind)
    if spec is None:
        return None
    return Ceilings(tflops=spec.tflops, bandwidth_gbps=spec.bandwidth_gbps)


def score(m: Measurement) -> Score | None:
    """Score an ``ok`` measurement; ``None`` for failures or when nothing to score against.

    Basis, in order: the datasheet of ``m.device_kind``; else the measured ceilings the worker
    reported (the host CPU); else the fastest recorded time of a replayed space.
    """
    if m.median_ms is None or not math.isfinite(m.median_ms) or m.median_ms <= 0:
        return None
    measured = Ceilings.from_json(m.ceilings) if m.ceilings else None
    if m.flops is not None and m.min_bytes and m.compute_dtype:
        sheet = datasheet_ceilings(m.device_kind or "")
        basis_ceilings, basis = (sheet, "datasheet") if sheet else (measured, "measured")
        if m.predicted:
            basis = "predicted"
        if basis_ceilings is not None:
            spec = device_spec(m.device_kind or "") if sheet else None
            peak = basis_ceilings.host_peak(m.compute_dtype) if m.device_kind == "cpu" \
                and not sheet else basis_ceilings.peak(m.compute_dtype)
            r = roof(m.flops, m.min_bytes, peak, basis_ceilings.bandwidth_gbps, m.exps,
                     spec.exp_per_s if spec else None)
            frac_measured = None
            if measured is not None:
                host = m.device_kind == "cpu"
                rm = roof(m.flops, m.min_bytes, measured.host_peak(m.compute_dtype) if host
                          else measured.peak(m.compute_dtype), measured.bandwidth_gbps)
                frac_measured = rm.roof_ms / m.median_ms
            seconds = m.median_ms / 1e3
            return Score(
                measured_ms=m.median_ms, roof_ms=r.roof_ms, fraction=r.roof_ms / m.median_ms,
                basis=basis, bound=r.bound, fraction_measured=frac_measured,
                tflops=m.flops / seconds / 1e12, gbps=m.min_bytes / seconds / 1e9,
                intensity=r.intensity,
            )
    if m.recorded_best_ms is not None and m.recorded_best_ms > 0:
        return Score(measured_ms=m.median_ms, roof_ms=m.recorded_best_ms,
                     fraction=m.recorded_best_ms / m.median_ms, basis="recorded-best",
                     bound="recorded-best")
    return None
