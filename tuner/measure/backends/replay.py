"""``replay:<file>``: answer from a recorded Kernel Tuner cache file, at zero device cost.

Recorded successes return the statistics of the recorded repetitions (``times``, in ms) as
every backend does: the median as the trial's time, p20/p80/min/n/cv; Kernel Tuner's own mean
(``time``) is kept in the provenance (``recorded_mean_ms``). Recorded failures keep their
status: ``CompilationFailedConfig`` → ``compile_error``; ``RuntimeFailedConfig`` (Kernel Tuner
records it for launch failures such as "too many resources requested") →
``out_of_resources``. Every trial carries the fastest recorded median of the space, so it is
scored as a fraction of the recorded optimum (basis ``recorded-best``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from search_spaces.recorded import Recording
from search_spaces.recorded import recorded_samples
from tuner.core.devices.datasheets import normalise_device_name
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Confirmation
from tuner.core.types import Measurement
from tuner.core.types import Retiming
from tuner.core.types import TrialStatus
from tuner.kernels.recorded import recording_of
from tuner.measure.timing import summarise

_FAILURES = {
    "CompilationFailedConfig": TrialStatus.COMPILE_ERROR,
    "RuntimeFailedConfig": TrialStatus.OUT_OF_RESOURCES,
    "InvalidConfig": TrialStatus.COMPILE_ERROR,
}


class ReplayBackend:
    def __init__(self, name: str, *, cache_dir: Path | None = None,
                 kernel_roots: tuple[Path, ...] = (), memory_bytes: int | None = None,
                 tenant: str | None = None) -> None:  # no process: nothing to isolate
        self.name = name
        self._rec: Recording | None = None
        self._best_ms: float | None = None

    def start(self) -> None:
        if self._rec is None:
            self._rec = recording_of(self.name)
            self._best_ms = self._rec.best_median_ms()

    @property
    def recording(self) -> Recording:
        self.start()
        assert self._rec is not None
        return self._rec

    def describe(self) -> dict[str, Any]:
        rec = self.recording
        return {"device_name": rec.device_name, "device_kind": normalise_device_name(
            rec.device_name), "backend": "replay", "file": rec.path.name, "digest": rec.digest}

    def run(self, request: BenchmarkRequest) -> Measurement:
        rec = self.recording
        base: dict[str, Any] = {
            "device_kind": normalise_device_name(rec.device_name),
            "recorded_best_ms": self._best_ms,
            "provenance": {"backend": "replay", "file": rec.path.name, "digest": rec.digest,
                           "device_name": rec.device_name,
                           "statistic": "median of the recorded repetitions"},
        }
        try:
            key = rec.key_of(request.params)
        except KeyError as exc:
            return Measurement.failure(TrialStatus.CRASHED, f"config lacks parameter {exc}",
                                       **base)
        entry = rec.entries.get(key)
        if entry is None:
            return Measurement.failure(TrialStatus.CRASHED,
                                       f"no recorded entry for {key} (statically invalid)", **base)
        value = entry.get("time")
        if isinstance(value, str):
            status = _FAILURES.get(value, TrialStatus.CRASHED)
            return Measurement.failure(status, f"recorded {value}", **base)
        if not isinstance(value, int | float):
            return Measurement.failure(TrialStatus.CRASHED, f"recorded time {value!r}", **base)
        samples = recorded_samples(entry)
        if not samples:
            return Measurement.failure(TrialStatus.CRASHED, f"recorded time {value!r}", **base)
        stats = summarise(samples)
        compile_ms = entry.get("compile_time")
        base["provenance"] = {**base["provenance"], "recorded_mean_ms": float(value)}
        return Measurement(
            status=str(TrialStatus.OK), median_ms=stats.median_ms, p20_ms=stats.p20_ms,
            p80_ms=stats.p80_ms, min_ms=stats.min_ms, n=stats.n, cv=stats.cv,
            compile_s=float(compile_ms) / 1e3 if isinstance(compile_ms, int | float) else None,
            **base,
        )

    def confirm(self, request: BenchmarkRequest) -> Confirmation:
        """Recorded data has no noise to confirm against: the recorded times come back."""
        timings = []
        for finalist in request.finalists or []:
            m = self.run(BenchmarkRequest.from_json({**request.to_json(),
                                                     "params": finalist["params"]}))
            if m.median_ms is None:
                return Confirmation.failed(m.error or "a finalist has no recorded time")
            timings.append(Retiming(int(finalist["trial_id"]), m.median_ms, m.n))
        return Confirmation(tuple(timings))

    def close(self) -> None:
        return None
