"""``tuner roofline``: the roofline of one problem on one device kind, and the batch at which a
matmul turns compute-bound.

All figures come from the datasheet table (``tuner/core/devices/datasheets.py``): peak TFLOP/s of
the compute
dtype and HBM bandwidth. Times in ms, intensities in FLOP per byte.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from dataclasses import dataclass
from typing import Any

from search_spaces import DTYPE_BYTES
from tuner.core.devices.datasheets import DEVICES
from tuner.core.devices.datasheets import device_spec
from tuner.core.roofline import roof


@dataclass(frozen=True)
class RooflineAnswer:
    """The roofline of a (FLOPs, bytes) pair on a device kind, and a measured time's place."""

    device_kind: str
    compute_dtype: str
    flops: float
    min_bytes: float
    intensity: float
    ridge: float | None
    bound: str
    roof_ms: float
    compute_ms: float
    memory_ms: float
    exp_ms: float | None = None
    measured_ms: float | None = None
    fraction: float | None = None
    headroom_ms: float | None = None
    max_speedup: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def roofline_answer(flops: float, min_bytes: float, compute_dtype: str, device_kind: str,
                    measured_ms: float | None = None, exps: float | None = None,
                    ) -> RooflineAnswer:
    """Raises ``ValueError`` for an unknown device kind or non-positive sizes."""
    spec = device_spec(device_kind)
    if spec is None:
        raise ValueError(f"unknown device kind {device_kind!r} (choose from "
                         f"{', '.join(DEVICES)})")
    if flops < 0 or min_bytes <= 0:
        raise ValueError("FLOPs must be ≥ 0 and bytes > 0")
    peak = spec.tflops.get(compute_dtype)
    r = roof(flops, min_bytes, peak, spec.bandwidth_gbps, exps, spec.exp_per_s)
    fraction = headroom = speedup = None
    if measured_ms is not None:
        if measured_ms <= 0:
            raise ValueError("the measured time must be positive")
        fraction = r.roof_ms / measured_ms
        headroom = max(0.0, measured_ms - r.roof_ms)
        speedup = measured_ms / r.roof_ms
    exp_ms = exps / spec.exp_per_s * 1e3 if exps and spec.exp_per_s else None
    return RooflineAnswer(device_kind, compute_dtype, flops, min_bytes, r.intensity, r.ridge,
                          r.bound, r.roof_ms, r.compute_ms, r.memory_ms, exp_ms, measured_ms,
                          fraction, headroom, speedup)


def compute_bound_tokens(k: int, n: int, dtype: str, device_kind: str) -> float:
    """Smallest M (tokens) at which an (M×K)·(K×N) matmul is compute-bound on the device.

    Intensity 2MKN / (s·(MK + KN + MN)) equals the ridge R at
    ``M = R·s·K·N / (2·K·N − R·s·(K + N))``; ``inf`` when it never gets there.
    """
    spec = device_spec(device_kind)
    if spec is None or dtype not in spec.tflops:
        return math.nan
    s = DTYPE_BYTES[dtype]
    ridge = spec.tflops[dtype] * 1e12 / (spec.bandwidth_gbps * 1e9)
    denominator = 2.0 * k * n - ridge * s * (k + n)
    return math.inf if denominator <= 0 else ridge * s * k * n / denominator


def tokens_table(k: int, n: int, dtype: str) -> list[dict[str, Any]]:
    """``compute_bound_tokens`` on every device kind of the table."""
    rows = []
    for kind, spec in DEVICES.items():
        if dtype not in spec.tflops:
            continue
        ridge = spec.tflops[dtype] * 1e12 / (spec.bandwidth_gbps * 1e9)
        rows.append({"device_kind": kind, "ridge": ridge,
                     "tokens": compute_bound_tokens(k, n, dtype, kind)})
    return rows
