"""Hostile kernels against real processes: the bench process finds no credential anywhere it
can read, dies with whatever started it, and is held to a memory cap; bad numbers never
reach a worker. (The fleet's side: ``test_fleet_hostile.py``.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FAULT_KERNEL
from tests.conftest import ROOT
from tests.conftest import db_rows
from tests.conftest import run_cli
from tests.conftest import run_cli_here
from tests.processes import children
from tests.processes import wait_gone

pytestmark = pytest.mark.integration

MARKER_URL = "redis://:s3cret-marker@127.0.0.1:9/0"
PROBE_SCRIPT = """
import json, sys
from pathlib import Path
import subprocess
from tuner.core.sandbox import protect_process
if sys.argv[1] == "open":  # the probe in a plain child of an unprotected parent
    out = subprocess.run([sys.executable, "-c", "from tests.kernels.fault_kernel import "
                          "probe_secrets; print(probe_secrets())"], capture_output=True,
                         text=True, check=True).stdout.strip()
    print(json.dumps({"status": "crashed", "error": out}))
    sys.exit(0)
assert protect_process()
from tuner.core.types import BenchmarkRequest, TimingSettings
from tuner.measure.bench_process import BenchProcess
p = BenchProcess("interpret", cache_dir=Path(sys.argv[2]), kernel_roots=(Path(sys.argv[3]),))
m = p.run(BenchmarkRequest(trial_id=1, attempt=1, job_id=1, kernel=sys.argv[4] + ":PROBE",
    problem={"N": 100}, dtype="fp32", params={"mode": "probe", "BLOCK": 64},
    backend="interpret", device_kind="cpu", timing=TimingSettings(0, 5, 2, 5)))
p.close()
print(json.dumps({"status": m.status, "error": m.error}))
"""


def _probe(cache_dir: Path, protect: bool) -> str:
    env = {**os.environ, "TUNER_BROKER_URL": MARKER_URL, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", PROBE_SCRIPT,
                           "protect" if protect else "open", str(cache_dir), str(ROOT),
                           FAULT_KERNEL], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["status"] == "crashed"
    return str(result["error"])


def _leaked(error: str) -> list[int]:
    match = re.search(r"leaked=\[([\d, ]*)\]", error)
    assert match, error
    return [int(p) for p in match.group(1).replace(" ", "").split(",") if p]


def test_the_probe_finds_credentials_of_an_unprotected_parent_and_none_of_a_protected_one(
        cache_dir):
    """A/B: the same probe, the same parent environment. Run in a plain child of an
    unprotected parent it finds the credential (the probe is sensitive); run as a kernel in a
    bench process (allowlisted, confined) of a protected parent it finds nothing."""
    opened = _probe(cache_dir, protect=False)
    assert _leaked(opened), opened  # the parent's environ was readable and held the marker
    protected = _probe(cache_dir, protect=True)
    assert _leaked(protected) == [] and "own=[]" in protected, protected
    assert int(re.search(r"ancestors=(\d+)", protected).group(1)) >= 1  # type: ignore[union-attr]


def test_tuner_tune_leaks_nothing_to_the_kernel(cli_env):
    env = {**cli_env, "TUNER_BROKER_URL": MARKER_URL}
    run_cli(["tune", "--kernel", f"{FAULT_KERNEL}:PROBE", "--shape", "N=100", "--trials", "1",
             "--backend", "interpret", "--rep-ms", "5", "--confirm-top", "0"], env)
    db = f"sqlite:///{Path(cli_env['TUNER_DATA_DIR']) / 'tuner.db'}"
    ((status, error),) = db_rows(db, "SELECT status, error FROM tuner_trials")
    assert status == "crashed" and "probe:" in error
    assert _leaked(error) == [] and "own=[]" in error, error


def _spinning_tune(cli_env) -> tuple[subprocess.Popen[str], int, str]:
    """``tuner tune`` of a kernel that spins for ever; returns it, its bench pid and its db."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", "tune", "--kernel", f"{FAULT_KERNEL}:SPIN",
         "--shape", "N=100", "--trials", "1", "--backend", "interpret", "--run-timeout", "600",
         "--compile-timeout", "600", "--confirm-top", "0"],
        env=cli_env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    db = f"sqlite:///{Path(cli_env['TUNER_DATA_DIR']) / 'tuner.db'}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if db_rows(db, "SELECT count(*) FROM tuner_trials WHERE status = 'running'")[0][0]:
                break
        except Exception:
            pass
        time.sleep(0.3)
    else:
        proc.kill()
        raise AssertionError(f"no running trial: {proc.communicate()[0]}")
    time.sleep(1.0)  # the bench process is inside the spinning launch
    (bench,) = children(proc.pid)
    return proc, bench, db


def test_sigterm_of_tuner_tune_cancels_the_job_and_kills_its_spinning_bench_process(cli_env):
    proc, bench, db = _spinning_tune(cli_env)
    os.kill(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    wait_gone([bench])
    assert db_rows(db, "SELECT status FROM tuner_jobs")[0][0] == "cancelled"
    assert db_rows(db, "SELECT count(*) FROM tuner_trials WHERE status = 'running'")[0][0] == 0


def test_kill_9_of_tuner_tune_takes_its_bench_process_along_and_cancel_cleans_up(cli_env):
    proc, bench, db = _spinning_tune(cli_env)
    os.kill(proc.pid, signal.SIGKILL)  # the process only: its bench child has its own session
    proc.communicate(timeout=30)
    wait_gone([bench])
    job = db_rows(db, "SELECT id FROM tuner_jobs")[0][0]
    out = run_cli(["cancel", str(job)], cli_env, check=True)
    assert "cancel" in out.stdout.lower()
    assert db_rows(db, "SELECT count(*) FROM tuner_trials WHERE status = 'running'")[0][0] == 0


def test_a_kernel_over_the_memory_cap_is_out_of_resources(cli_env):
    run_cli(["tune", "--kernel", f"{FAULT_KERNEL}:HOG", "--shape", "N=100", "--trials", "1",
             "--backend", "interpret", "--rep-ms", "5", "--confirm-top", "0",
             "--bench-memory", "0.75"], cli_env)
    db = f"sqlite:///{Path(cli_env['TUNER_DATA_DIR']) / 'tuner.db'}"
    ((status, error),) = db_rows(db, "SELECT status, error FROM tuner_trials")
    assert status == "out_of_resources" and "cap of 0.75 GiB" in error, error


def test_a_gpu_out_of_memory_error_is_out_of_resources_and_the_next_trial_runs(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from tuner.core.types import BenchmarkRequest
    from tuner.core.types import TimingSettings
    from tuner.testing.fake_cuda import FakeCudaBackend

    backend = FakeCudaBackend(kernel_roots=(ROOT,))

    def request(mode: str) -> BenchmarkRequest:
        return BenchmarkRequest(trial_id=1, attempt=1, job_id=1, kernel=f"{FAULT_KERNEL}:GPU_OOM",
                                problem={"N": 100}, dtype="fp32",
                                params={"mode": mode, "BLOCK": 64}, backend="cuda",
                                device_kind="h100-sxm", timing=TimingSettings(0, 1, 2, 3))

    oom = backend.run(request("gpu_oom"))
    assert oom.status == "out_of_resources" and "out of memory" in (oom.error or "")
    assert backend.run(request("ok")).status == "ok"


@pytest.mark.parametrize(("option", "value", "text"), [
    ("--compile-timeout", "1e300", "--compile-timeout must be above 0 and at most 86400"),
    ("--run-timeout", "nan", "--run-timeout must be a finite number"),
    ("--run-timeout", "inf", "--run-timeout must be a finite number"),
    ("--rep-ms", "-5", "--rep-ms must be above 0"),
    ("--max-attempts", "0", "--max-attempts must be at least 1"),
    ("--idempotency-key", "k" * 5000, "--idempotency-key is 5000 characters long"),
    ("--parallel", "100000", "--parallel must be at least 1 and at most 1024"),
])
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_out_of_bounds_options_are_one_error_line_on_every_database(
        cli_env, postgres, database, option, value, text):
    env = dict(cli_env)
    if database == "postgresql":
        env["TUNER_DB_URL"] = postgres.url
    run = run_cli if option == "--max-attempts" else run_cli_here  # one through a process
    proc = run(["submit", "matmul", "--shape", "M=64,N=64,K=64", "--backend", "interpret",
                option, value], env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert text in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1, proc.stderr


def test_an_in_place_kernel_is_checked_on_fresh_inputs_before_it_is_timed(cache_dir):
    """Checklist #9: ``x += 1`` changes its own input on every timed call; the correctness
    check ran on the first call with fresh inputs, so it passes."""
    from tuner.core.types import BenchmarkRequest
    from tuner.core.types import TimingSettings
    from tuner.measure.bench_process import BenchProcess

    proc = BenchProcess("interpret", cache_dir=cache_dir, kernel_roots=(ROOT,))
    try:
        m = proc.run(BenchmarkRequest(
            trial_id=1, attempt=1, job_id=1, kernel=f"{FAULT_KERNEL}:IN_PLACE",
            problem={"N": 1000}, dtype="fp32", params={"BLOCK": 64}, backend="interpret",
            device_kind="cpu", timing=TimingSettings(0, 5, 5, 10)))
    finally:
        proc.close()
    assert m.status == "ok" and m.max_rel_error == 0.0 and m.n >= 5, m.error


INJECTION = "x'); DROP TABLE tuner_trials;--"


def test_sql_injection_shaped_names_are_stored_verbatim(cli_env, tmp_path):
    """Checklist #21: a kernel name and an idempotency key shaped like SQL injection are stored
    and read back as written, and every table is still there."""
    module = tmp_path / "odd_names.py"
    module.write_text("from tests.kernels.fault_kernel import spec\n"
                      f"ODD = spec(('ok',), name={INJECTION!r})\n")
    env = {**cli_env, "TUNER_KERNEL_ROOTS": f"{ROOT}:{tmp_path}", "PYTHONPATH": str(ROOT)}
    run_cli(["tune", "--kernel", f"{module}:ODD", "--shape", "N=100", "--trials", "1",
             "--backend", "interpret", "--rep-ms", "5", "--confirm-top", "0"], env, check=True)
    run_cli(["submit", "--kernel", f"{module}:ODD", "--shape", "N=100", "--backend",
             "interpret", "--idempotency-key", INJECTION], env, check=True)
    db = f"sqlite:///{Path(cli_env['TUNER_DATA_DIR']) / 'tuner.db'}"
    kernels = {k for (k,) in db_rows(db, "SELECT kernel FROM tuner_jobs")}
    assert kernels == {INJECTION}
    assert db_rows(db, "SELECT idempotency_key FROM tuner_jobs WHERE idempotency_key "
                       "IS NOT NULL")[0][0] == INJECTION
    assert db_rows(db, "SELECT count(*) FROM tuner_trials")[0][0] >= 1  # the table is intact
    assert any(INJECTION in name for (name,) in db_rows(db, "SELECT study_name FROM studies"))
    best = run_cli(["best", INJECTION, "--shape", "N=100", "--dtype", "fp32",
                    "--device-kind", "cpu"], env)
    assert best.returncode == 0 and "BLOCK" in best.stdout, best.stdout + best.stderr


def test_a_python_caller_of_tuner_tune_leaks_nothing_to_the_kernel(cli_env):
    """``tuner.tune()`` protects its caller as the CLI protects itself. Same-user mode
    (``TUNER_SANDBOX=off``), where the kernel runs as the caller's own user: without the
    protection a non-root caller's environment is readable to the probe (as root, the bench
    process's dropped capabilities hide it anyway, so the caller's own state is checked too)."""
    env = {**cli_env, "TUNER_BROKER_URL": MARKER_URL, "TUNER_SANDBOX": "off",
           "PYTHONPATH": str(ROOT)}
    kernel = f"{FAULT_KERNEL}:PROBE"
    code = (f"import tuner; tuner.tune({kernel!r}, 'N=100', trials=1, backend='interpret', "
            "confirm_top=0)\n"
            "from tuner.core.sandbox import is_protected; assert is_protected(), 'unprotected'")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    db = f"sqlite:///{Path(cli_env['TUNER_DATA_DIR']) / 'tuner.db'}"
    ((status, error),) = db_rows(db, "SELECT status, error FROM tuner_trials")
    assert status == "crashed" and "probe:" in error
    assert _leaked(error) == [] and "own=[]" in error, error
    assert int(re.search(r"ancestors=(\d+)", error).group(1)) >= 1  # type: ignore[union-attr]
