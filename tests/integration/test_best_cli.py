"""`tuner best`: shapes checked as `tuner tune` checks them, the same sources as Python
(TUNER_BEST_CONFIGS), this machine's device by default, and one line for an unreadable source."""

from __future__ import annotations

import json

import pytest

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
