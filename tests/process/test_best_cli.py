"""`tuner best`: shapes checked as `tuner tune` checks them, the same sources as Python
(TUNER_BEST_CONFIGS), this machine's device by default, and one line for an unreadable source."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.conftest import run_cli
from tuner.testing.services import free_port

H100 = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
        "num_stages": 3}


@pytest.fixture()
def export(tmp_path):
    entry = {"kernel": "matmul", "problem": {"M": 4096, "N": 4096, "K": 4096}, "dtype": "bf16",
             "device_kind": "h100-sxm", "config": H100, "fraction": 0.8, "fingerprint": {}}
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"schema": 1, "exported_at": "", "source": "t",
                                "configs": [entry], "defaults": {}}))
    return path


@pytest.mark.parametrize(("shape", "message"), [
    ("M=-4,N=4096,K=4096", "M must be positive, got -4"),
    ("M=0,N=4096,K=4096", "M must be positive, got 0"),
    ("M=4096,N=4096", "missing dimension(s) K"),
])
def test_bad_shapes_are_refused_like_tune(cli_env, export, shape, message):
    proc = run_cli(["best", "matmul", "--shape", shape, "--dtype", "bf16", "--source",
                    str(export)], cli_env)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_it_reads_tuner_best_configs_and_serves_this_machine(cli_env, export):
    env = {**cli_env, "TUNER_BEST_CONFIGS": str(export)}
    args = ["best", "matmul", "--shape", "M=4096,N=4096,K=4096", "--dtype", "bf16"]
    here = run_cli(args, env)  # this machine is a CPU: nothing tuned for it
    assert here.returncode == 1 and "on cpu" in here.stderr, here.stderr
    gpu = run_cli(args, {**env, "TUNER_DEVICE_KIND": "h100-sxm"})
    assert gpu.returncode == 0 and json.loads(gpu.stdout) == H100, gpu.stderr
    crossed = run_cli([*args, "--device-kind", "any"], env)
    assert crossed.returncode == 0 and json.loads(crossed.stdout) == H100
    assert "tuned on h100-sxm, this process runs on cpu" in crossed.stderr


@pytest.mark.parametrize("source", ["missing-db", "corrupt", "unreachable"])
def test_an_unreadable_source_is_one_error_line(cli_env, tmp_path, source):
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{")
    src = {"missing-db": f"sqlite:///{tmp_path / 'nothing' / 'tuner.db'}",
           "corrupt": str(corrupt),
           "unreachable": f"postgresql+psycopg://u:pw@127.0.0.1:{free_port()}/x"}[source]
    proc = run_cli(["best", "matmul", "--shape", "M=8,N=8,K=8", "--dtype", "fp16",
                    "--source", src], cli_env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: cannot read tuned configs from")
    assert "Traceback" not in proc.stderr and "pw@" not in proc.stderr
    assert not (tmp_path / "nothing").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["matmul", "--dtype", "fp17"], "unknown dtype 'fp17' for matmul (choose from"),
    (["nokernel", "--dtype", "fp16"], "unknown kernel 'nokernel': not a built-in"),
    (["matmul", "--dtype", "bf16", "--device-kind", "h999"], "unknown device kind 'h999'"),
])
def test_a_question_nobody_can_answer_is_a_usage_error(cli_env, export, args, message):
    proc = run_cli(["best", *args, "--shape", "M=4096,N=4096,K=4096", "--source", str(export)],
                   cli_env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"error: {message}"), proc.stderr


def test_device_kinds_are_normalised_and_both_sources_say_the_same(cli_env, tmp_path):
    """A database and its export answer one question alike: a tuned dtype is served from
    both (``--device-kind CPU`` is ``cpu``); an untuned one is exit 1 from both, the export
    naming the default it holds instead of serving it as if tuned."""
    run_cli(["tune", "matmul", "--shape", "M=16,N=16,K=16", "--dtype", "fp32", "--backend",
             "interpret", "--trials", "1", "--confirm-top", "0"], cli_env, check=True,
            timeout=300)
    exported = tmp_path / "best.json"
    run_cli(["export", "--out", str(exported)], cli_env, check=True)
    for source in ([], ["--source", str(exported)]):
        ask = ["best", "matmul", "--shape", "M=16,N=16,K=16", "--device-kind", "CPU", *source]
        tuned = run_cli([*ask, "--dtype", "fp32"], cli_env)
        assert tuned.returncode == 0 and "tier exact" in tuned.stderr, tuned.stderr
        untuned = run_cli([*ask, "--dtype", "fp16"], cli_env)
        assert untuned.returncode == 1, untuned.stdout + untuned.stderr
        assert "no tuned config for matmul M=16,N=16,K=16 fp16 on cpu" in untuned.stderr
        assert untuned.stdout == ""


def test_a_builtin_is_answered_without_importing_torch(cli_env, export):
    """Scripts and health checks call ``tuner best``: no staleness check needs torch here."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "tuner.cli", "best",
                           "matmul", "--shape", "M=4096,N=4096,K=4096", "--dtype", "bf16",
                           "--device-kind", "h100-sxm", "--source", str(export)],
                          env=cli_env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout) == H100, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "torch" not in imported and "triton" not in imported
