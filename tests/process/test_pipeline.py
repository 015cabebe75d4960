"""The pipelined worker (``tuner.measure.pipeline``) with real processes: real Triton compiles for
``sm_90`` in a compile pool, a stand-in device (``tuner.measure.devices.standin``: simulated
device time),
a local job, and a Celery worker with a thread pool."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.conftest import db_rows
from tests.conftest import run_cli
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.core.types import Measurement
from tuner.core.types import TimingSettings
from tuner.measure.backends.registry import make_backend
from tuner.measure.pipeline import CompilePool
from tuner.measure.pipeline import PipelinedBackend

FAULT = "tests/kernels/fault_kernel.py:COMPILE_ERROR"
MATMUL_CONFIGS = [
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
     "num_stages": 3},
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4,
     "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 4, "num_warps": 4,
     "num_stages": 3},
]


def request(trial_id: int, kernel: str, params: dict[str, Any],
            problem: dict[str, int] | None = None, dtype: str = "fp16") -> BenchmarkRequest:
    return BenchmarkRequest(
        trial_id=trial_id, attempt=1, job_id=1, kernel=kernel,
        problem=problem or {"M": 512, "N": 512, "K": 512}, dtype=dtype, params=params,
        backend="standin:h200", device_kind="h200",
        timing=TimingSettings(warmup_ms=0.0, rep_ms=200.0))


def overlapping(intervals: list[tuple[float, float]]) -> bool:
    ordered = sorted(intervals)
    return any(b[0] < a[1] - 1e-6 for a, b in itertools.pairwise(ordered))


def test_compile_ahead_feeds_the_device_from_the_cache_and_keeps_failures_off_it(
        tmp_path: Path) -> None:
    pool = CompilePool("h200", 2, cache_dir=tmp_path, kernel_roots=(ROOT,))
    backend = PipelinedBackend(make_backend("standin:h200", cache_dir=tmp_path,
                                            kernel_roots=(ROOT,)), pool)
    backend.start()
    try:
        requests = [request(i, "matmul", p) for i, p in enumerate(MATMUL_CONFIGS)]
        requests.append(request(9, FAULT, {"mode": "compile_error", "BLOCK": 32},
                                problem={"N": 1000}, dtype="fp32"))
        results: dict[int, Measurement] = {}

        def one(r: BenchmarkRequest) -> None:
            results[r.trial_id] = backend.run(r)

        threads = [threading.Thread(target=one, args=(r,)) for r in requests]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        failed = results[9]
        assert failed.status == "compile_error", failed.error
        assert failed.phases["pipelined"] is True
        assert "device_start" not in failed.phases  # it never reached the device
        measured = [results[i] for i in range(len(MATMUL_CONFIGS))]
        for m in measured:
            assert m.status == "ok", m.error
            assert m.predicted and m.provenance.get("simulated")  # a stand-in: labelled
            assert m.phases["cache_hit"] is False  # the pool compiled it, in a fresh cache
            assert m.phases["device_cache_hit"] is True  # the device only loaded it
            assert m.phases["timing_s"] == pytest.approx(0.2)
            waited = m.phases["device_start"] - m.phases["compile_end"]  # unix seconds
            assert m.phases["device_wait_s"] == pytest.approx(waited, abs=0.05)
        # two configs compiled side by side, one device held 0.2 s each: one of them waited
        assert max(m.phases["device_wait_s"] for m in measured) > 0.1
        spans = [(m.phases["device_start"], m.phases["device_end"]) for m in measured]
        assert not overlapping(spans)  # one trial on the device at a time
        compiles = [(m.phases["compile_start"], m.phases["compile_end"]) for m in measured]
        assert overlapping(compiles)  # two compile processes worked side by side
        again = backend.run(request(5, "matmul", MATMUL_CONFIGS[0]))
        assert again.phases["cache_hit"] is True  # compiled once per config and target
        checked = backend.pool.check(request(6, "matmul", MATMUL_CONFIGS[1]))  # its builder
        assert checked.status == "ok" and checked.cache_hit is True and checked.regs
    finally:
        backend.close()


def test_local_job_pipelined_shows_device_time_in_status_report_and_dashboard(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    import optuna

    from tuner.app.local import run_local_job
    from tuner.core.settings import Settings
    from tuner.kernels import resolve_kernel

    settings = Settings.from_env(cli_env)
    kernel = resolve_kernel("matmul", "standin:h200", settings.kernel_roots, isolated=True)
    spec = JobSpec(kernel="matmul", problems=[{"M": 512, "N": 512, "K": 512}], dtype="fp16",
                   backend="standin:h200", device_kind="h200", sampler="random", seed=1,
                   budget=Budget(trials=6), timing=TimingSettings(warmup_ms=0, rep_ms=100),
                   lookahead=2, confirm_top=0, static_check="h200", transfer=0)
    outcome = run_local_job(spec, kernel, settings)
    # simulated results are predictions: never a best config production could be served
    assert db_rows(settings.db_url, "SELECT count(*) FROM tuner_best_configs")[0][0] == 0
    status = run_cli(["status", str(outcome.job_id), "--trials"], cli_env)
    assert status.returncode == 0, status.stderr
    assert "device time:" in status.stdout and "busy measuring" in status.stdout
    assert "cache hits" in status.stdout and "device wait s" in status.stdout
    assert "started from cold start (no prior)" in status.stdout  # random uses no prior
    as_json = run_cli(["status", str(outcome.job_id), "--json"], cli_env)
    import json

    assert json.loads(as_json.stdout)[0]["problems"][0]["prior"] is None
    device_time = json.loads(as_json.stdout)[0]["device_time"]
    assert 0 < device_time["busy_fraction"] <= 1 and device_time["gpu_seconds"] > 0
    # the static check compiled each config first: the pipeline found it in the cache
    assert device_time["cache_hits"] == device_time["cache_known"] > 0
    report = run_cli(["report", str(outcome.job_id), "--out", str(tmp_path / "r")], cli_env)
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "r" / "report.html").read_text()
    assert 'id="timeline"' in page and 'id="device-time"' in page
    assert 'id="priors"' in page and "cold start (no prior)" in page
    assert (tmp_path / "r" / "timeline.png").stat().st_size > 1000
    [study] = optuna.get_all_study_summaries(settings.db_url)
    trials = optuna.load_study(study_name=study.study_name, storage=settings.db_url).trials
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert done and all("phase_timing_s" in t.user_attrs for t in done)
    assert all(t.user_attrs["phase_pipelined"] is True for t in done)


@pytest.mark.parametrize(("args", "text"), [
    (["tune", "matmul", "--shape", "M=64,N=64,K=64", "--backend", "interpret",
      "--compile-procs", "2"], "--compile-procs compiles configs ahead for a GPU"),
    (["worker", "--device", "cpu", "--compile-procs", "1"], "--compile-procs compiles ahead"),
    (["worker", "--device", "cuda:0", "--compile-procs", "-1"], "between 0 and 63"),
    (["worker", "--device", "standin:foo"], "the stand-in simulates a datasheet GPU"),
    (["tune", "matmul", "--shape", "M=64,N=64,K=64", "--backend", "standin:h200",
      "--compile-procs", "100"], "--compile-procs must be between 0 and 63, not 100"),
])
def test_compile_procs_misuse_is_a_clear_usage_error(args: list[str], text: str,
                                                     cli_env: dict[str, str]) -> None:
    proc = run_cli(args, cli_env, timeout=120)
    assert proc.returncode == 2
    assert text in proc.stderr and "Traceback" not in proc.stderr


def test_stand_in_times_a_kernel_without_a_model_at_its_roofline(tmp_path: Path) -> None:
    """A user's kernel has no analytic model (and, memory-bound, declares no FLOPs): the
    stand-in reports its roofline time, marked a prediction."""
    from tuner.core.roofline import datasheet_ceilings
    from tuner.core.roofline import roof

    backend = make_backend("standin:h200", cache_dir=tmp_path, kernel_roots=(ROOT,))
    backend.start()
    try:
        problem = {"n_rows": 256, "n_cols": 1000}
        m = backend.run(request(1, "examples/byo_softmax.py:softmax",
                                {"BLOCK_SIZE": 1024, "num_warps": 4}, problem, "fp32"))
    finally:
        backend.close()
    assert m.status == "ok", m.error
    sheet = datasheet_ceilings("h200")
    assert sheet is not None and m.flops == 0 and m.min_bytes
    expected = roof(0.0, m.min_bytes, sheet.peak("fp32"), sheet.bandwidth_gbps).roof_ms
    assert m.predicted and m.median_ms == pytest.approx(expected)


def test_a_compile_pool_that_cannot_start_leaves_the_compile_to_the_device(
        tmp_path: Path) -> None:
    pool = CompilePool("h200", 1, cache_dir=tmp_path, kernel_roots=(ROOT,))
    for proc in pool._procs:  # an interpreter that cannot start: no compile process comes up
        proc.process.extra_env["PYTHONHOME"] = str(tmp_path / "no-python-here")
    backend = PipelinedBackend(make_backend("standin:h200", cache_dir=tmp_path,
                                            kernel_roots=(ROOT,)), pool)
    try:
        m = backend.run(request(1, "matmul", MATMUL_CONFIGS[1]))
    finally:
        backend.close()
    assert m.status == "ok", m.error
    assert "did not start" in m.phases["compile_fallback"] or \
        "exited" in m.phases["compile_fallback"], m.phases["compile_fallback"]
    assert m.phases["device_cache_hit"] is False  # the device compiled it itself
