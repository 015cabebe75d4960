"""The one timing routine per device, and the statistics every measurement reports.

``time_cpu`` and ``time_cuda`` share the contract of ``triton.testing.do_bench``: warm up for a
time budget, estimate the per-call time, derive the number of timed calls from ``rep_ms`` and
clamp it to ``min_reps…max_reps``. They return every sample in milliseconds; ``summarise`` turns
samples into median, p20, p80, min, n and coefficient of variation.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuner.core.types import TimingSettings


@dataclass(frozen=True)
class Stats:
    """Summary of timing samples, all in milliseconds except ``n`` and ``cv`` (std / mean)."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    min_ms: float
    n: int
    cv: float


def quantile(sorted_samples: list[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted samples (``q`` in [0, 1])."""
    if not sorted_samples:
        raise ValueError("no samples")
    pos = q * (len(sorted_samples) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_samples) - 1)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (pos - lo)


def summarise(samples: list[float]) -> Stats:
    """Median, p20, p80, min, n and CV of ``samples`` (ms). Raises on empty or non-finite."""
    if not samples or not all(math.isfinite(s) for s in samples):
        raise ValueError(f"timing samples must be finite and non-empty: {samples[:5]}")
    ordered = sorted(samples)
    mean = statistics.fmean(ordered)
    std = statistics.pstdev(ordered) if len(ordered) > 1 else 0.0
    return Stats(
        median_ms=quantile(ordered, 0.5), p20_ms=quantile(ordered, 0.2),
        p80_ms=quantile(ordered, 0.8), min_ms=ordered[0], n=len(ordered),
        cv=std / mean if mean > 0 else 0.0,
    )


def repetitions(estimate_ms: float, settings: TimingSettings) -> tuple[int, int]:
    """(warm-up calls, timed calls) for a call that takes about ``estimate_ms``."""
    est = max(estimate_ms, 1e-6)
    n_warmup = max(1, int(settings.warmup_ms / est)) if settings.warmup_ms > 0 else 0
    n_rep = int(settings.rep_ms / est)
    return n_warmup, min(settings.max_reps, max(settings.min_reps, n_rep))


def time_cpu(fn: Callable[[], object], settings: TimingSettings) -> list[float]:
    """Wall-clock samples (ms) of ``fn`` on the host, one ``perf_counter`` pair per call.

    The estimate is taken from one call; there is no cache flush (the interpreter's per-call
    Python overhead dwarfs cache effects).
    """
    start = time.perf_counter()
    fn()
    estimate_ms = (time.perf_counter() - start) * 1e3
    n_warmup, n_rep = repetitions(estimate_ms, settings)
    for _ in range(max(0, n_warmup - 1)):
        fn()
    samples = []
    for _ in range(n_rep):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def _runtime(cuda: Any) -> Any:
    """The CUDA runtime to time with: ``torch.cuda`` unless another is given (the
    conformance kit's fake GPU, ``tuner.testing.fake_cuda``)."""
    if cuda is not None:
        return cuda
    import torch

    return torch.cuda


def time_cuda(fn: Callable[[], object], settings: TimingSettings, flush_buffer: Any | None,
              cuda: Any = None) -> list[float]:
    """CUDA-event samples (ms) of ``fn``, with the L2 flushed before every call.

    ``flush_buffer`` (a tensor at least twice the L2) is zeroed before each call, outside the
    timed region: flush → record → call → record. Five flushed calls give the estimate; warm-up
    runs by time, as in ``do_bench``. ``cuda``: the runtime (default ``torch.cuda``).
    """
    cuda = _runtime(cuda)

    def flush() -> None:
        if flush_buffer is not None:
            flush_buffer.zero_()

    cuda.synchronize()
    start_ev = cuda.Event(enable_timing=True)
    end_ev = cuda.Event(enable_timing=True)
    start_ev.record()
    for _ in range(5):
        flush()
        fn()
    end_ev.record()
    cuda.synchronize()
    estimate_ms = start_ev.elapsed_time(end_ev) / 5
    n_warmup, n_rep = repetitions(estimate_ms, settings)
    for _ in range(n_warmup):
        fn()
    starts = [cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        flush()
        starts[i].record()
        fn()
        ends[i].record()
    cuda.synchronize()
    return [float(s.elapsed_time(e)) for s, e in zip(starts, ends, strict=True)]


def rounds_for(estimates_ms: list[float], settings: TimingSettings) -> int:
    """Rounds of an interleaved measurement: ``rep_ms`` over the time of one round."""
    return repetitions(sum(estimates_ms), settings)[1]


def time_interleaved_cpu(fns: list[Callable[[], object]],
                         settings: TimingSettings) -> list[list[float]]:
    """Samples (ms) of each function, timed round-robin: f0 f1 f2 f0 f1 f2 …"""
    estimates = []
    for fn in fns:
        start = time.perf_counter()
        fn()
        estimates.append((time.perf_counter() - start) * 1e3)
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds_for(estimates, settings)):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            samples[i].append((time.perf_counter() - start) * 1e3)
    return samples


def time_interleaved_cuda(fns: list[Callable[[], object]], settings: TimingSettings,
                          flush_buffer: Any | None, cuda: Any = None) -> list[list[float]]:
    """CUDA-event samples (ms) of each function, round-robin, L2 flushed before every call
    (``cuda``: the runtime, default ``torch.cuda``)."""
    cuda = _runtime(cuda)
    estimates = [statistics.median(time_cuda(fn, TimingSettings(
        warmup_ms=settings.warmup_ms, rep_ms=0, min_reps=3, max_reps=3), flush_buffer, cuda))
        for fn in fns]
    n = rounds_for(estimates, settings)
    events = [[(cuda.Event(enable_timing=True), cuda.Event(enable_timing=True))
               for _ in range(n)] for _ in fns]
    for r in range(n):
        for i, fn in enumerate(fns):
            if flush_buffer is not None:
                flush_buffer.zero_()
            start, end = events[i][r]
            start.record()
            fn()
            end.record()
    cuda.synchronize()
    return [[float(s.elapsed_time(e)) for s, e in per] for per in events]
