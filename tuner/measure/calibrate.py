"""Measured ceilings of the device a bench process owns: copy bandwidth and matmul peaks.

Runs inside the bench process (the only process that may initialise CUDA). Results are cached
in a JSON file under the cache folder, keyed by everything that changes them (device name,
host, torch version, thread count), so a restarted worker does not pay for them again.

Units: bandwidth in GB/s (bytes read + bytes written per second, 10^9), peaks in TFLOP/s.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from search_spaces import stable_hash

#: Matmul dtypes calibrated, by the compute-dtype names used for roofline peaks.
MATMUL_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}


def _median_seconds(fn: Callable[[], object], sync: Callable[[], None], reps: int) -> float:
    fn()
    sync()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _copy_seconds(n: int, device: str, sync: Callable[[], None], reps: int) -> float:
    """Median seconds to copy ``n`` fp32 elements device-to-device (buffers freed after)."""
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    return _median_seconds(lambda: dst.copy_(src), sync, reps)


def _mm_seconds(size: int, dtype: torch.dtype, device: str, sync: Callable[[], None],
                reps: int) -> float:
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    return _median_seconds(lambda: torch.mm(a, b), sync, reps)


#: CPU matmul sizes: from CPU_MM_START, doubled while one product takes under CPU_MM_ENOUGH_S
#: (seconds), at most CPU_MM_MAX. A CPU without fast fp16 kernels takes about 3 s for one
#: 1024^3 fp16 product (measured on a two-core EPYC VM), where fp32 takes 0.03 s: a fixed size
#: made the first bench process on a host wait some 13 s for its ceilings.
CPU_MM_START, CPU_MM_MAX, CPU_MM_ENOUGH_S = 128, 1024, 0.05


def sized_to_take(seconds_at: Callable[[int], float], start: int, largest: int,
                  enough_s: float) -> int:
    """The first of ``start``, 2 ``start``, … ``largest`` at which ``seconds_at(size)`` (one
    timed run) is at least ``enough_s`` — long enough to time, short enough to repeat."""
    size = start
    while size < largest and seconds_at(size) < enough_s:
        size *= 2
    return size


def measure_ceilings(device: str) -> dict[str, Any]:
    """Copy bandwidth and matmul TFLOP/s per dtype on ``device`` ("cpu" or "cuda"); on a CPU
    each dtype's matmul is sized by ``sized_to_take`` (its size is in ``method``)."""
    on_gpu = device.startswith("cuda")
    sync: Callable[[], None] = torch.cuda.synchronize if on_gpu else (lambda: None)
    n_copy = (256 if on_gpu else 32) * 1024 * 1024  # fp32 elements: 1 GiB or 128 MiB
    copy_s = _copy_seconds(n_copy, device, sync, reps=10 if on_gpu else 5)
    bandwidth_gbps = 2 * n_copy * 4 / copy_s / 1e9
    tflops: dict[str, float] = {}
    sizes: list[str] = []
    for name, dtype in MATMUL_DTYPES.items():
        size = 8192 if on_gpu else sized_to_take(
            lambda n: _mm_seconds(n, dtype, device, sync, reps=1),  # noqa: B023 (called here)
            CPU_MM_START, CPU_MM_MAX, CPU_MM_ENOUGH_S)
        seconds = _mm_seconds(size, dtype, device, sync, reps=10 if on_gpu else 3)
        tflops[name] = 2 * size**3 / seconds / 1e12
        sizes.append(f"{name} {size}^3")
    return {"bandwidth_gbps": bandwidth_gbps, "tflops": tflops,
            "method": f"copy of {n_copy * 4 >> 20} MiB; torch.mm {', '.join(sizes)}; median"}


#: The last ceilings this process read or measured, and the cache file they belong in: a
#: sandboxed bench process may not write the cache folder, so it reports them to its parent.
LAST_CALIBRATION: dict[str, Any] = {}


def cached_ceilings(device: str, device_name: str, cache_dir: Path | None) -> dict[str, Any]:
    """``measure_ceilings`` through a JSON cache file keyed by device, host and versions
    (``LAST_CALIBRATION`` says which file and what)."""
    key = stable_hash({
        "device": device_name, "host": platform.node(), "torch": torch.__version__,
        "threads": torch.get_num_threads(), "schema": 2,
    }, 16)
    path = cache_dir / f"ceilings-{key}.json" if cache_dir else None
    if path is not None and path.is_file():
        try:
            data: dict[str, Any] = json.loads(path.read_text())
            if "bandwidth_gbps" in data and "tflops" in data:
                return data
        except (OSError, ValueError):
            pass
    data = measure_ceilings(device)
    LAST_CALIBRATION.update(file=f"ceilings-{key}.json", data=data)
    data["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            tmp.replace(path)
        except OSError:
            pass  # a read-only cache only costs a re-measurement next time
    return data
