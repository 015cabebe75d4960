"""The isolated bench process: every failure becomes a status, and the worker carries on."""

from __future__ import annotations

import os
import time

import pytest

from tests.conftest import FAULT_KERNEL
from tests.conftest import ROOT
from tests.processes import wait_gone
from tuner.core.types import BenchmarkRequest
from tuner.core.types import TimingSettings
from tuner.measure.bench_process import BenchProcess

FAST = TimingSettings(warmup_ms=0, rep_ms=5, min_reps=2, max_reps=5)


def _request(mode: str, trial_id: int = 1, compile_timeout_s: float = 60,
             run_timeout_s: float = 60) -> BenchmarkRequest:
    return BenchmarkRequest(
        trial_id=trial_id, attempt=1, job_id=1, kernel=f"{FAULT_KERNEL}:FAULT",
        problem={"N": 1000}, dtype="fp32", params={"mode": mode, "BLOCK": 64},
        backend="interpret", device_kind="cpu", timing=FAST,
        compile_timeout_s=compile_timeout_s, run_timeout_s=run_timeout_s)


@pytest.fixture()
def bench(cache_dir):
    proc = BenchProcess("interpret", cache_dir=cache_dir, kernel_roots=(ROOT,))
    proc.start("job-1")  # the tenant of every request below
    yield proc
    proc.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ok_trial_is_checked_and_timed(bench):
    m = bench.run(_request("ok"))
    assert m.status == "ok", m.error
    assert m.median_ms > 0 and m.n >= 2 and m.max_rel_error == 0.0
    assert m.device_kind == "cpu" and m.ceilings["bandwidth_gbps"] > 0
    assert m.provenance["backend"] == "interpret" and m.provenance["triton"]


@pytest.mark.parametrize(("mode", "status", "text"), [
    ("compile_error", "compile_error", "power of 2"),
    ("out_of_resources", "out_of_resources", "shared memory"),
    ("wrong_result", "wrong_result", "relative Frobenius error"),
])
def test_failures_inside_the_process_keep_it_alive(bench, mode, status, text):
    pid = bench.pid
    m = bench.run(_request(mode))
    assert m.status == status and text in (m.error or "")
    assert bench.pid == pid  # same process serves the next trial
    assert bench.run(_request("ok")).status == "ok"


@pytest.mark.parametrize(("mode", "text"), [("exit", "exited with code 7"),
                                            ("signal", "killed by SIGSEGV")])
def test_a_crash_is_a_trial_status_and_the_process_is_replaced(bench, mode, text):
    pid = bench.pid
    m = bench.run(_request(mode))
    assert m.status == "crashed" and text in (m.error or ""), m.error
    assert not _alive(pid)
    ok = bench.run(_request("ok"))
    assert ok.status == "ok" and bench.pid != pid


@pytest.mark.parametrize(("mode", "phase"), [("hang_compile", "compile"), ("hang_run", "run")])
def test_a_hang_is_killed_at_its_timeout(bench, mode, phase):
    pid = bench.pid
    start = time.monotonic()
    # only the hanging phase gets the short limit: a compile slowed by a busy machine must not
    # pass for the run's hang
    m = bench.run(_request(mode, compile_timeout_s=3 if phase == "compile" else 60,
                           run_timeout_s=3 if phase == "run" else 60))
    elapsed = time.monotonic() - start
    assert m.status == "timeout" and f"{phase} exceeded 3 s" in (m.error or "")
    assert elapsed < 30
    wait_gone([pid], timeout_s=10)  # killed, not left behind
    assert bench.run(_request("ok")).status == "ok"


def test_kernel_output_never_corrupts_the_protocol(bench, tmp_path):
    kernel = tmp_path / "noisy.py"
    kernel.write_text(
        "from tests.kernels.fault_kernel import spec\n"
        "print('{\"event\": \"result\", \"measurement\": {\"status\": \"ok\"}}')\n"
        "NOISY = spec()\n")
    proc = BenchProcess("interpret", cache_dir=bench.cache_dir, kernel_roots=(tmp_path, ROOT))
    try:
        req = BenchmarkRequest.from_json({**_request("ok").to_json(),
                                          "kernel": f"{kernel}:NOISY"})
        m = proc.run(req)
        assert m.status == "ok" and m.median_ms is not None
    finally:
        proc.close()


def test_the_bench_process_sees_no_service_credentials(cache_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TUNER_DB_URL", "postgresql://user:secret@db/tuner")
    kernel = tmp_path / "snoop.py"
    kernel.write_text(
        "import os\nfrom tests.kernels.fault_kernel import spec\n"
        "assert 'TUNER_DB_URL' not in os.environ, 'credentials leaked'\n"
        "SNOOP = spec()\n")
    proc = BenchProcess("interpret", cache_dir=cache_dir, kernel_roots=(tmp_path, ROOT))
    try:
        req = BenchmarkRequest.from_json({**_request("ok").to_json(),
                                          "kernel": f"{kernel}:SNOOP"})
        m = proc.run(req)
        assert m.status == "ok", m.error
    finally:
        proc.close()
