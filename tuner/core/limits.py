"""The bounds of every number and string a job carries (README, "Limits").

A job is checked against them where it enters (``tuner tune``/``tuner submit``, ``tuner.tune``,
``create_job``) and again where a worker reads it back, so a value no process can handle (an
infinite timeout, a NaN, a timeout that overflows a date, a 5,000-character key) is refused
with one clear line instead of poisoning the fleet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tuner.core.target import BadTarget
from tuner.core.target import Target
from tuner.core.types import JobSpec


@dataclass(frozen=True)
class Bound:
    """``low ≤ value ≤ high`` (``low`` excluded when ``open_low``), finite, for ``option``."""

    option: str
    low: float
    high: float
    open_low: bool = False
    integer: bool = False

    def error(self, value: float | None) -> str | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{self.option} must be a number, not {value!r}"
        if self.integer and not float(value).is_integer():
            return f"{self.option} must be a whole number, not {value!r}"
        if not math.isfinite(value):
            return f"{self.option} must be a finite number, not {value!r}"
        too_low = value <= self.low if self.open_low else value < self.low
        if too_low or value > self.high:
            lo = f"above {self.low:g}" if self.open_low else f"at least {self.low:g}"
            return f"{self.option} must be {lo} and at most {self.high:g}, not {value:g}"
        return None


DAY_S = 86_400.0
BOUNDS = {
    "trials": Bound("--trials", 1, 1_000_000, integer=True),
    "wall_s": Bound("--time-limit", 0, 30 * DAY_S, open_low=True),
    "target_fraction": Bound("--target", 0, 2, open_low=True),
    "patience": Bound("--patience", 1, 1_000_000, integer=True),
    "seed": Bound("--seed", 0, 2**32 - 1, integer=True),
    "parallel": Bound("--parallel", 1, 1024, integer=True),
    "compile_timeout_s": Bound("--compile-timeout", 0, DAY_S, open_low=True),
    "run_timeout_s": Bound("--run-timeout", 0, DAY_S, open_low=True),
    "warmup_ms": Bound("--warmup-ms", 0, 60_000),
    "rep_ms": Bound("--rep-ms", 0, 60_000, open_low=True),
    "max_attempts": Bound("--max-attempts", 1, 20, integer=True),
    "confirm_top": Bound("--confirm-top", 0, 50, integer=True),
    "transfer": Bound("--transfer", 0, 100, integer=True),
    "lookahead": Bound("--lookahead", 0, 64, integer=True),
}
#: Longest accepted text of each string option (characters).
MAX_TEXT = {"kernel": 1_000, "idempotency_key": 200, "static_check": 64, "sampler": 64,
            "backend": 1_000, "dtype": 32, "device_kind": 64}
MAX_PROBLEMS = 1_000
#: The largest row id (jobs, trials, problems): the id columns are 32-bit integers.
MAX_ID = 2**31 - 1


def _text_error(option: str, value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        return f"{option} must be text"
    if len(value) > limit:
        return f"{option} is {len(value)} characters long; the limit is {limit}"
    if any(not ch.isprintable() for ch in value):
        return f"{option} contains control characters"
    return None


def spec_errors(spec: JobSpec) -> list[str]:
    """Every bound ``spec`` breaks (empty when it keeps them all)."""
    b, t = spec.budget, spec.timing
    values = {
        "trials": b.trials, "wall_s": b.wall_s, "target_fraction": b.target_fraction,
        "patience": b.patience, "seed": spec.seed, "parallel": spec.parallel,
        "compile_timeout_s": spec.compile_timeout_s, "run_timeout_s": spec.run_timeout_s,
        "warmup_ms": t.warmup_ms, "rep_ms": t.rep_ms, "max_attempts": spec.max_attempts,
        "confirm_top": spec.confirm_top, "transfer": spec.transfer,
        "lookahead": spec.lookahead,
    }
    errors = [e for key, v in values.items() if (e := BOUNDS[key].error(v)) is not None]
    for key, limit in MAX_TEXT.items():
        option = "--" + key.replace("_", "-")
        if (e := _text_error(option, getattr(spec, key), limit)) is not None:
            errors.append(e)
    if isinstance(spec.backend, str) and len(spec.backend) <= MAX_TEXT["backend"]:
        try:
            Target.parse(spec.backend)
        except BadTarget as exc:
            errors.append(str(exc))
    if len(spec.problems) > MAX_PROBLEMS:
        errors.append(f"{len(spec.problems)} problems in one job; the limit is {MAX_PROBLEMS}")
    return errors
