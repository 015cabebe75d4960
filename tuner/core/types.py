"""The values that cross boundaries: job specs, benchmark requests, measurements, scores.

Everything here is a frozen dataclass of JSON scalars (stdlib only), so it can travel through a
queue as JSON and be rebuilt on the other side. Tensors never travel: a worker rebuilds inputs
from the problem sizes, the dtype and the seed.

Units: times in milliseconds (``*_ms``) or seconds (``*_s``), FLOPs and bytes as plain counts,
throughputs in TFLOP/s and GB/s (10^12 and 10^9 per second).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from dataclasses import fields
from enum import StrEnum
from typing import Any

from tuner.core.target import Target
from tuner.core.target import as_target


class TrialStatus(StrEnum):
    """Where a trial is in its life. The first three are transient; the rest are final.

    ``checking``: being compiled for the target without a GPU (static check) before it may be
    queued; ``invalid`` trials violate a static constraint or fail the static check and never
    reach a device; ``lost`` trials had their worker vanish more often than the attempt cap
    allows.
    """

    CHECKING = "checking"
    QUEUED = "queued"
    RUNNING = "running"
    OK = "ok"
    INVALID = "invalid"
    COMPILE_ERROR = "compile_error"
    OUT_OF_RESOURCES = "out_of_resources"
    WRONG_RESULT = "wrong_result"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    LOST = "lost"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self not in (TrialStatus.CHECKING, TrialStatus.QUEUED, TrialStatus.RUNNING)


#: Statuses a benchmark can report (the others are decided by the service, not a device).
#: ``invalid``: the config breaks a constraint of the kernel's module that only the bench
#: process, which imports it, can evaluate (``tuner.kernels.isolated``).
MEASURED_STATUSES = frozenset({
    TrialStatus.OK, TrialStatus.COMPILE_ERROR, TrialStatus.OUT_OF_RESOURCES,
    TrialStatus.WRONG_RESULT, TrialStatus.TIMEOUT, TrialStatus.CRASHED, TrialStatus.INVALID,
})


class JsonRecord:
    """Mixin: ``to_json`` / ``from_json`` for flat frozen dataclasses of JSON values."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload, no-any-return]

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in fields(cls)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class TimingSettings(JsonRecord):
    """How a worker times one config.

    ``warmup_ms`` and ``rep_ms`` are time budgets (as in ``triton.testing.do_bench``): the
    number of calls is derived from an estimate, then clamped to ``min_reps…max_reps``.
    ``flush_l2`` zeroes a buffer twice the L2 size before every timed GPU call.
    """

    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    min_reps: int = 5
    max_reps: int = 1000
    flush_l2: bool = True

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TimingSettings:
        return cls(**{k: v for k, v in data.items() if k in cls.field_names()})


@dataclass(frozen=True)
class BenchmarkRequest(JsonRecord):
    """One config to measure: what the queue carries (ids and JSON scalars only).

    ``kernel`` is a registered kernel name or ``path/to/module.py:NAME``; ``backend`` is
    ``interpret``, ``cuda[:N]`` or ``replay:<file>``. ``attempt`` numbers deliveries of the same
    trial: a result is stored only if the trial is still at that attempt.
    """

    trial_id: int
    attempt: int
    job_id: int
    kernel: str
    problem: dict[str, int]
    dtype: str
    params: dict[str, Any]
    backend: str
    device_kind: str
    seed: int = 0
    timing: TimingSettings = field(default_factory=TimingSettings)
    compile_timeout_s: float = 120.0
    run_timeout_s: float = 60.0
    #: ``bench`` measures; ``check`` compiles for ``device_kind`` without running (in a
    #: builder for that GPU kind); ``confirm`` re-times ``finalists`` interleaved.
    mode: str = "bench"
    finalists: list[dict[str, Any]] | None = None

    @property
    def target(self) -> Target:
        """``backend``, parsed (``BadTarget`` if it names no target)."""
        return as_target(self.backend)
    kernel_hash: str = ""
    problem_id: int = 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["timing"] = self.timing.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchmarkRequest:
        """Strict decoding: unknown or missing fields and non-JSON values raise ``ValueError``."""
        if not isinstance(data, Mapping):
            raise ValueError("a benchmark request must be a JSON object")
        names = cls.field_names()
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown request fields: {sorted(unknown)}")
        values = dict(data)
        values["timing"] = TimingSettings.from_json(values.get("timing", {}))
        try:
            request = cls(**values)
        except TypeError as exc:
            raise ValueError(f"malformed benchmark request: {exc}") from None
        if not isinstance(request.problem, dict) or not isinstance(request.params, dict):
            raise ValueError("problem and params must be JSON objects")
        return request


@dataclass(frozen=True)
class Measurement(JsonRecord):
    """What a worker reports for one request.

    Timing fields are ``None`` unless ``status == "ok"``. ``flops`` and ``min_bytes`` are the
    kernel's own counts for this problem; ``compute_dtype`` names the peak that applies (e.g.
    ``tf32`` for fp32 inputs on tensor cores). ``ceilings`` are the measured ceilings of the
    device that ran it (``{"bandwidth_gbps": …, "tflops": {dtype: …}}``).
    """

    status: str
    median_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    min_ms: float | None = None
    n: int = 0
    cv: float | None = None
    compile_s: float | None = None
    error: str | None = None
    max_rel_error: float | None = None
    flops: float | None = None
    min_bytes: float | None = None
    #: Exponentials the kernel must compute (attention), or None: the exp roof.
    exps: float | None = None
    compute_dtype: str | None = None
    device_kind: str | None = None
    ceilings: dict[str, Any] | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    recorded_best_ms: float | None = None
    #: True for an analytic prediction (``model:`` backend): never a measurement.
    predicted: bool = False
    #: Where the trial's time went (``workers.phases``): compile, cache hit, device wait,
    #: check and timing seconds, and when it held the device (unix seconds).
    phases: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def failure(cls, status: TrialStatus, error: str, **extra: Any) -> Measurement:
        return cls(status=str(status), error=error[-4000:], **extra)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        names = cls.field_names()
        m = cls(**{k: v for k, v in data.items() if k in names})
        if m.status not in {str(s) for s in MEASURED_STATUSES}:
            raise ValueError(f"a measurement cannot have status {m.status!r}")
        if m.status == TrialStatus.OK and not _finite_positive(m.median_ms):
            raise ValueError("an ok measurement needs a finite positive median_ms")
        return m


def _finite_positive(x: float | None) -> bool:
    return x is not None and math.isfinite(x) and x > 0


@dataclass(frozen=True)
class StaticResult(JsonRecord):
    """A config compiled for a GPU target without running it (``tuner.measure.static_check``).

    ``status``: ``ok``; ``out_of_resources`` (more shared memory than a block may have: it
    cannot launch); ``spills`` (ptxas spilled registers to local memory); or the status of a
    compile failure. Sizes in bytes; ``regs`` per thread.
    """

    status: str
    target: str
    regs: int | None = None
    spill_bytes: int | None = None
    smem_bytes: int | None = None
    smem_limit: int | None = None
    compile_s: float | None = None
    error: str | None = None
    #: True when every kernel binary came from Triton's cache (nothing compiled); ``None``
    #: when the Triton in use cannot tell.
    cache_hit: bool | None = None

    @property
    def launchable(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StaticResult:
        return cls(**{k: v for k, v in data.items() if k in cls.field_names()})


@dataclass(frozen=True)
class Retiming:
    """One finalist re-timed in a confirmation: its trial, median (ms) and samples."""

    trial_id: int
    median_ms: float
    n: int


@dataclass(frozen=True)
class Confirmation:
    """A request's finalists re-timed interleaved (``timings``, in the finalists' order), or
    why they could not be (``error``; ``fatal``: the device is unusable after it)."""

    timings: tuple[Retiming, ...] = ()
    error: str | None = None
    fatal: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def failed(cls, error: str, fatal: bool = False) -> Confirmation:
        return cls(error=error or "confirmation failed", fatal=fatal)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Confirmation:
        """From the wire form ``{"timings": [{trial_id, median_ms, n}, …]}`` or
        ``{"error": …}``; anything else is an error."""
        if data.get("error") is not None or not isinstance(data.get("timings"), list):
            return cls.failed(str(data.get("error") or "no timings"), bool(data.get("fatal")))
        return cls(tuple(Retiming(int(t["trial_id"]), float(t["median_ms"]), int(t["n"]))
                         for t in data["timings"]))

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": self.error, "fatal": self.fatal}
        return {"timings": [asdict(t) for t in self.timings]}


@dataclass(frozen=True)
class Score(JsonRecord):
    """A measurement against its roofline.

    ``roof_ms = max(flops / peak, min_bytes / bandwidth)``; ``fraction = roof_ms / measured_ms``
    against the datasheet (or, for a device without one, its measured ceilings);
    ``fraction_measured`` against the worker's calibrated ceilings when known. ``basis`` says
    which roofline ``fraction`` used: ``datasheet``, ``measured``, ``predicted`` (a model's
    prediction against the datasheet, never a measurement) or ``recorded-best`` (replay data:
    the fastest recorded time of the whole space stands in for the roof).
    """

    measured_ms: float
    roof_ms: float
    fraction: float
    basis: str
    bound: str
    fraction_measured: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    intensity: float | None = None


@dataclass(frozen=True)
class Budget(JsonRecord):
    """When to stop a problem: after ``trials`` measured configs, ``wall_s`` seconds, a best
    roofline fraction of ``target_fraction``, or ``patience`` measured trials without a new best
    (``None`` disables a rule)."""

    trials: int = 30
    wall_s: float | None = None
    target_fraction: float | None = None
    patience: int | None = None


#: How many stored best configs of related problems a job starts from (``--transfer``).
DEFAULT_TRANSFER = 3


@dataclass(frozen=True)
class JobSpec(JsonRecord):
    """A tuning job as submitted: kernel, problems, dtype, where to run, how to search."""

    kernel: str
    problems: list[dict[str, int]]
    dtype: str
    backend: str
    device_kind: str
    sampler: str = "auto"
    seed: int | None = None
    budget: Budget = field(default_factory=Budget)
    parallel: int = 1
    timing: TimingSettings = field(default_factory=TimingSettings)
    compile_timeout_s: float = 120.0
    run_timeout_s: float = 60.0
    max_attempts: int = 3
    idempotency_key: str | None = None
    #: Device kind whose compiler statically checks every config before it is measured
    #: (registers, spills, shared memory), e.g. ``h100-sxm``; ``None``: no static check.
    static_check: str | None = None
    #: Re-time the top ``confirm_top`` configs interleaved before declaring the winner
    #: (0 or 1: no confirmation).
    confirm_top: int = 3
    #: Start the default search from the best stored configs of this kernel and dtype on up to
    #: ``transfer`` related problems (``tuner.search.transfer``); 0: off.
    transfer: int = DEFAULT_TRANSFER
    #: Trials per worker in flight beyond the one on its device (``tuner.measure.pipeline``): the
    #: driver keeps ``parallel × (1 + lookahead)`` in flight. A pipelined worker with ``p``
    #: compile processes wants ``p + 1``: ``p`` compiling, one compiled and waiting; 0: serial.
    lookahead: int = 0

    @property
    def target(self) -> Target:
        """``backend``, parsed (``BadTarget`` if it names no target)."""
        return as_target(self.backend)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["budget"] = self.budget.to_json()
        data["timing"] = self.timing.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobSpec:
        values = {k: v for k, v in data.items() if k in cls.field_names()}
        values["budget"] = Budget(**values.get("budget", {}))
        values["timing"] = TimingSettings.from_json(values.get("timing", {}))
        return cls(**values)


def problem_key(problem: Mapping[str, int]) -> str:
    """Readable, canonical name of a problem: ``M512-N512-K512`` (dims in declared order)."""
    return "-".join(f"{k}{v}" for k, v in problem.items())


def problem_hash(problem: Mapping[str, int]) -> str:
    """Key of a problem, independent of the order its dimensions are given in."""
    from search_spaces.canonical import stable_hash

    return stable_hash({str(k): int(v) for k, v in problem.items()})
