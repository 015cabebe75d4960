"""Wire types (strict JSON decoding) and timing statistics."""

from __future__ import annotations

import json
import math

import pytest

from tuner.core.types import BenchmarkRequest
from tuner.core.types import JobSpec
from tuner.core.types import Measurement
from tuner.core.types import TimingSettings
from tuner.core.types import problem_hash
from tuner.core.types import problem_key
from tuner.measure.timing import repetitions
from tuner.measure.timing import summarise


def _request() -> BenchmarkRequest:
    return BenchmarkRequest(trial_id=3, attempt=1, job_id=2, kernel="matmul",
                            problem={"M": 8, "N": 8, "K": 8}, dtype="fp16",
                            params={"BLOCK_M": 16}, backend="interpret", device_kind="cpu")


def test_request_round_trips_through_json_text():
    req = _request()
    again = BenchmarkRequest.from_json(json.loads(json.dumps(req.to_json())))
    assert again == req


@pytest.mark.parametrize("bad", [
    {"trial_id": 1},  # missing fields
    {**_request().to_json(), "evil": "__import__('os')"},  # unknown field
    ["not", "an", "object"],
    {**_request().to_json(), "problem": [1, 2]},
])
def test_request_decoding_is_strict(bad):
    with pytest.raises(ValueError):
        BenchmarkRequest.from_json(bad)


def test_measurement_decoding_refuses_values_optuna_must_not_see():
    with pytest.raises(ValueError, match="finite positive"):
        Measurement.from_json({"status": "ok", "median_ms": math.nan})
    with pytest.raises(ValueError, match="cannot have status"):
        Measurement.from_json({"status": "lost"})
    m = Measurement.from_json({"status": "timeout", "error": "x", "surprise": 1})
    assert m.status == "timeout" and m.median_ms is None


def test_job_spec_round_trip_and_problem_keys():
    spec = JobSpec(kernel="matmul", problems=[{"M": 1, "N": 2, "K": 3}], dtype="bf16",
                   backend="interpret", device_kind="cpu")
    assert JobSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    assert problem_key({"M": 1, "N": 2, "K": 3}) == "M1-N2-K3"
    assert problem_hash({"M": 1, "N": 2, "K": 3}) == problem_hash({"K": 3, "M": 1, "N": 2})


def test_summarise_quantiles_by_hand():
    s = summarise([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (s.median_ms, s.min_ms, s.n) == (3.0, 1.0, 5)
    assert s.p20_ms == pytest.approx(1.8)  # position 0.8 between 1 and 2
    assert s.p80_ms == pytest.approx(4.2)
    assert s.cv == pytest.approx(math.sqrt(2) / 3)
    with pytest.raises(ValueError):
        summarise([1.0, math.inf])


def test_repetitions_follow_do_bench_budgets():
    settings = TimingSettings(warmup_ms=25, rep_ms=100, min_reps=5, max_reps=1000)
    assert repetitions(1.0, settings) == (25, 100)
    assert repetitions(50.0, settings) == (1, 5)  # clamped to min_reps
    assert repetitions(1e-4, settings)[1] == 1000  # clamped to max_reps
    assert repetitions(1.0, TimingSettings(warmup_ms=0, rep_ms=10, min_reps=3))[0] == 0
