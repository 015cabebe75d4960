"""Device-time accounting (``tuner.core.device_time``): spans, busy fraction, phases."""

from __future__ import annotations

import pytest

from tuner.core.device_time import account
from tuner.core.device_time import segments
from tuner.core.device_time import trial_phases


def serial(worker: str, start: float, first_call: float, check: float, timing: float,
           hit: bool) -> dict[str, object]:
    held = first_call + check + timing
    return {"worker": worker, "device_start": start, "device_end": start + held,
            "device_s": held, "first_call_s": first_call, "check_s": check,
            "timing_s": timing, "device_cache_hit": hit}


def test_serial_worker_counts_compile_on_the_device_and_gaps_as_idle() -> None:
    trials = [serial("w", 100.0, 0.5, 0.0, 0.25, False),   # held 100.0 – 100.75
              serial("w", 101.0, 0.5, 0.0, 0.25, True)]    # gap 0.25 s, held 101.0 – 101.75
    dt = account((t, 0.01) for t in trials)
    [w] = dt.workers
    assert w.span_s == pytest.approx(1.75)
    assert w.busy_s == pytest.approx(0.5)
    assert w.on_device_compile_s == pytest.approx(1.0)
    assert w.idle_s == pytest.approx(0.25)
    assert dt.gpu_seconds == pytest.approx(1.75)
    assert dt.busy_fraction == pytest.approx(0.5 / 1.75)
    assert dt.compiles == 2 and dt.compile_s == pytest.approx(1.0)
    assert (dt.cache_hits, dt.cache_known) == (1, 2)
    assert dt.medians["queue_wait_s"] == pytest.approx(0.01)


def test_pipelined_span_starts_at_the_first_compile_and_sums_over_devices() -> None:
    first = {**serial("a", 10.0, 0.01, 0.0, 1.0, True), "pipelined": True,
             "compile_s": 0.4, "cache_hit": False, "compile_start": 9.5,
             "compile_end": 9.9, "device_wait_s": 0.1}
    other = serial("b", 10.0, 0.01, 0.1, 0.9, True)
    dt = account([(first, None), (other, None), (None, None)])
    spans = {w.worker: w.span_s for w in dt.workers}
    assert spans == {"a": pytest.approx(1.51), "b": pytest.approx(1.01)}
    assert dt.busy_fraction == pytest.approx(2.0 / 2.52)
    shown = trial_phases(first, 0.2)
    assert shown["compile_s"] == 0.4 and shown["cache_hit"] is False  # the pool's compile
    assert shown["device_wait_s"] == 0.1 and shown["queue_wait_s"] == 0.2
    assert trial_phases(other)["compile_s"] == pytest.approx(0.01)  # the device's first call
    kinds = {(row, kind) for row, _, _, kind in segments([first, other])}
    assert kinds == {("a pool", "pool compile"), ("a", "compile"), ("a", "busy"),
                     ("b", "compile"), ("b", "busy")}


def test_no_device_time_without_phases() -> None:
    dt = account([(None, None), ({"worker": "w"}, None)])
    assert dt.workers == [] and dt.busy_fraction is None and dt.gpu_seconds == 0.0


def test_compile_ahead_defaults_follow_the_cores_and_only_gpu_backends_pipeline() -> None:
    from tuner.app.options import FLEET_LOOKAHEAD
    from tuner.app.options import lookahead_for
    from tuner.core.parsing import UsageError
    from tuner.measure.pipeline import default_compile_procs

    assert default_compile_procs(gpus=1, cores=2) == 1
    assert default_compile_procs(gpus=8, cores=128) == 8  # 15 per GPU, capped at 8
    assert default_compile_procs(gpus=4, cores=4) == 1  # never below one
    from tuner.core.target import Target

    assert lookahead_for(2, Target.parse("cuda"), 1, submit=False) == 3  # 2 compiling, 1 waiting
    assert lookahead_for(0, Target.parse("cuda:1"), 1, submit=False) == 0  # serial
    assert lookahead_for(None, Target.parse("standin:h200"), 1, submit=True) == FLEET_LOOKAHEAD
    assert lookahead_for(None, Target.parse("interpret"), 1, submit=False) == 0
    with pytest.raises(UsageError, match="--lookahead compiles configs ahead"):
        lookahead_for(2, Target.parse("replay:x.json"), 1, submit=True)


def test_the_interpreter_compiles_nothing() -> None:
    shown = trial_phases({"interpreted": True, "first_call_s": 0.1, "timing_s": 0.2})
    assert shown["compile_s"] is None and shown["cache_hit"] is None
    assert shown["timing_s"] == 0.2


def test_one_pipeline_value_gives_lookahead_threads_and_pool_size() -> None:
    from tuner.measure.pipeline import Pipeline

    assert (Pipeline(0).lookahead, Pipeline(0).threads) == (0, 1)  # serial: one thread
    assert (Pipeline(2).lookahead, Pipeline(2).threads) == (3, 4)  # 2 compiling, 1 waiting
    for procs in range(9):
        assert Pipeline.from_lookahead(Pipeline(procs).lookahead) == Pipeline(procs)
