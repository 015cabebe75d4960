"""Where a job's device time went: measuring, compiling on the device, idle (GPU-seconds).

Reads the ``phases`` every trial records (``Measurement.phases``, stored in
``tuner_trials.phases``; written by ``tuner.measure.bench``, ``tuner.measure.bench_process``,
``tuner.measure.pipeline`` and ``tuner.control.trial_worker``). All times in seconds;
``device_start`` and ``device_end`` are unix seconds.

Definitions, per worker (one device):

* **span**: first ``device_start`` (or, on a pipelined worker, first ``compile_start``: the
  device waits while the pipe fills) → last ``device_end`` of the job's trials on it: how long
  the job held that device. The job's **GPU-seconds** are the sum of its workers' spans.
* **busy**: the device running the kernel for the trial's correctness check and timing loop
  (``check_s + timing_s``).
* **on-device compile**: the rest of the time a trial held the device (``device_s - busy``):
  the first call's compile or cache load, input set-up, process messages.
* **idle**: span minus the time trials held the device (waiting for a compile or a proposal).

``busy fraction = Σ busy / Σ span``. A trial's **compile** seconds are the compile pool's when
the worker compiles ahead (``pipelined``), else its first call on the device (none under the
interpreter, which does not compile); ``cache_hit`` says whether that compile found its binary
in Triton's cache.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any

#: Phase columns shown per trial (``tuner status``, the report, the dashboard), in order.
PHASES = ("queue_wait_s", "compile_s", "device_wait_s", "check_s", "timing_s")


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def queue_wait_s(published_at: dt.datetime | None,
                 started_at: dt.datetime | None) -> float | None:
    """Seconds from a trial's publication to a worker claiming it (``None``: unknown)."""
    if published_at is None or started_at is None:
        return None
    return max(0.0, (started_at - published_at).total_seconds())


def trial_phases(phases: Mapping[str, Any] | None,
                 queue_wait_s: float | None = None) -> dict[str, Any]:
    """One trial's phases in the shown form: ``PHASES`` (seconds or None) and ``cache_hit``."""
    ph = phases or {}
    pipelined = bool(ph.get("pipelined"))
    first_call = None if ph.get("interpreted") else ph.get("first_call_s")  # no compile
    out: dict[str, Any] = {
        "queue_wait_s": queue_wait_s,
        "compile_s": _num(ph.get("compile_s") if pipelined else first_call),
        "device_wait_s": _num(ph.get("device_wait_s")),
        "check_s": _num(ph.get("check_s")), "timing_s": _num(ph.get("timing_s")),
        "cache_hit": ph.get("cache_hit") if pipelined else ph.get("device_cache_hit"),
        "pipelined": pipelined, "device_s": _num(ph.get("device_s"))}
    return out


@dataclass(frozen=True)
class WorkerTime:
    """One device's time in a job (seconds)."""

    worker: str
    trials: int
    span_s: float
    device_s: float
    busy_s: float

    @property
    def on_device_compile_s(self) -> float:
        return max(0.0, self.device_s - self.busy_s)

    @property
    def idle_s(self) -> float:
        return max(0.0, self.span_s - self.device_s)


@dataclass(frozen=True)
class DeviceTime:
    """A job's device time over all its workers; ``busy_fraction`` is ``None`` before any
    trial held a device."""

    workers: list[WorkerTime] = field(default_factory=list)
    compile_s: float = 0.0
    compiles: int = 0
    cache_hits: int = 0
    cache_known: int = 0
    medians: dict[str, float | None] = field(default_factory=dict)

    @property
    def gpu_seconds(self) -> float:
        return sum(w.span_s for w in self.workers)

    @property
    def busy_s(self) -> float:
        return sum(w.busy_s for w in self.workers)

    @property
    def busy_fraction(self) -> float | None:
        span = self.gpu_seconds
        return self.busy_s / span if span > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu_seconds": self.gpu_seconds, "busy_s": self.busy_s,
            "busy_fraction": self.busy_fraction, "compile_s": self.compile_s,
            "compiles": self.compiles, "cache_hits": self.cache_hits,
            "cache_known": self.cache_known, "median_phase_s": dict(self.medians),
            "workers": [{"worker": w.worker, "trials": w.trials, "span_s": w.span_s,
                         "device_s": w.device_s, "busy_s": w.busy_s,
                         "on_device_compile_s": w.on_device_compile_s, "idle_s": w.idle_s}
                        for w in self.workers]}


def account(trials: Iterable[tuple[Mapping[str, Any] | None, float | None]]) -> DeviceTime:
    """The device time of ``trials``: (phases, queue wait s) pairs, one per trial."""
    per_worker: dict[str, list[Mapping[str, Any]]] = {}
    shown: list[dict[str, Any]] = []
    for phases, queue_wait in trials:
        if not phases:
            continue
        shown.append(trial_phases(phases, queue_wait))
        if _num(phases.get("device_start")) is not None and \
                _num(phases.get("device_end")) is not None:
            per_worker.setdefault(str(phases.get("worker", "?")), []).append(phases)
    workers = []
    for name, rows in sorted(per_worker.items()):
        # a pipelined device is the job's from its first compile: filling the pipe is idle
        start = min(min(float(r["device_start"]), _num(r.get("compile_start")) or math.inf)
                    for r in rows)
        end = max(float(r["device_end"]) for r in rows)
        workers.append(WorkerTime(
            worker=name, trials=len(rows), span_s=end - start,
            device_s=sum(_num(r.get("device_s")) or 0.0 for r in rows),
            busy_s=sum((_num(r.get("check_s")) or 0.0) + (_num(r.get("timing_s")) or 0.0)
                       for r in rows)))
    compiles = [s["compile_s"] for s in shown if s["compile_s"] is not None]
    known = [s["cache_hit"] for s in shown if isinstance(s["cache_hit"], bool)]
    medians = {}
    for name in PHASES:
        values = [s[name] for s in shown if s[name] is not None]
        medians[name] = statistics.median(values) if values else None
    return DeviceTime(workers, sum(compiles), len(compiles), sum(known), len(known), medians)


def segments(phases: Iterable[Mapping[str, Any]]) -> list[tuple[str, float, float, str]]:
    """Timeline pieces ``(row, start, end, kind)`` in unix seconds, ``kind`` one of ``busy``,
    ``compile`` (on the device) and ``pool compile`` (off it, row ``<worker> pool``)."""
    out: list[tuple[str, float, float, str]] = []
    for ph in phases:
        worker = str(ph.get("worker", "?"))
        start, end = _num(ph.get("device_start")), _num(ph.get("device_end"))
        if ph.get("pipelined"):
            c0, c1 = _num(ph.get("compile_start")), _num(ph.get("compile_end"))
            if c0 is not None and c1 is not None:
                out.append((f"{worker} pool", c0, c1, "pool compile"))
        if start is None or end is None:
            continue
        busy = (_num(ph.get("check_s")) or 0.0) + (_num(ph.get("timing_s")) or 0.0)
        busy_from = max(start, end - busy)
        if busy_from > start:
            out.append((worker, start, busy_from, "compile"))
        if busy > 0:
            out.append((worker, busy_from, end, "busy"))
    return out
