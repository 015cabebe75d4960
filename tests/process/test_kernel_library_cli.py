"""`tuner tune` on every library kernel, the fusion chain and the user-kernel examples, on the
interpreter: each job completes with correct results and a stored, servable best config."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.conftest import db_rows
from tests.conftest import run_cli
from tests.conftest import run_cli_here

CASES = [
    ("softmax", "M=3,N=300", "fp16"),
    ("layernorm", "M=4,N=70", "bf16"),
    ("rmsnorm", "M=4,N=70", "fp32"),
    ("attention", "Z=1,H=2,S=40,D=16", "fp16"),
    ("attention_causal", "Z=1,H=1,S=40,D=64", "bf16"),
    ("matmul+bias+gelu+residual", "M=40,N=24,K=20", "fp16"),
    ("matmul", "M=40,N=24,K=20", "fp8e4m3"),
    ("linear+bias+gelu+residual+layernorm", "M=24,N=40,K=20", "fp16"),
    ("examples/add_relu_kernel.py:ADD_RELU", "N=3000", "fp16"),
    ("examples/autotuned_softmax.py:SOFTMAX_AUTOTUNED", "M=4,N=600", "fp32"),
]


@pytest.mark.parametrize(("kernel", "shape", "dtype"), CASES, ids=[c[0] for c in CASES])
def test_tune_each_kernel_end_to_end(cli_env, tmp_path, kernel, shape, dtype):
    option = ["--kernel", kernel] if kernel.endswith(tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")) \
        else [kernel]
    proc = run_cli(["tune", *option, "--shape", shape, "--dtype", dtype, "--trials", "3",
                    "--backend", "interpret", "--seed", "0", "--confirm-top", "0"],
                   cli_env, check=True)
    assert "best config:" in proc.stdout
    db_url = f"sqlite:///{tmp_path / 'data' / 'tuner.db'}"
    # measured trials: on the interpreter, a config differing only in launch options from one
    # already measured is a free repeat (duplicate_of set), not a measurement
    trials = db_rows(db_url, "SELECT status, max_rel_error FROM tuner_trials "
                           "WHERE status NOT IN ('invalid', 'cancelled') "
                           "AND duplicate_of IS NULL")
    # the autotuned softmax on N=600 has one valid block size (1024): its other configs
    # differ only in warps and stages, which the interpreter cannot tell apart
    assert len(trials) == (1 if kernel.endswith("SOFTMAX_AUTOTUNED") else 3)
    assert all(t.status == "ok" and t.max_rel_error is not None for t in trials), trials
    (best,) = db_rows(db_url, "SELECT kernel, config, fraction FROM tuner_best_configs")
    assert best.fraction > 0
    served = run_cli(["best", best.kernel, "--shape", shape, "--dtype", dtype], cli_env,
                     check=True)
    assert json.loads(served.stdout) == json.loads(best.config)
    if kernel.startswith("linear+"):
        assert json.loads(best.config)["grouping"] in ("unfused", "separate", "epilogue", "full")


def test_kernels_lists_every_kernel_with_its_parameters(cli_env):
    out = run_cli(["kernels"], cli_env, check=True).stdout
    for name in ("matmul", "softmax", "layernorm", "rmsnorm", "attention", "attention_causal",
                 "linear+bias+gelu+residual+layernorm", "matmul+[bias]"):
        assert name in out
    assert "grouping ∈ {unfused,separate,epilogue,full}" in out
    assert "EW_BLOCK ∈ {128,256,512,1024,2048,4096} when grouping in {unfused,separate}" in out


def test_python_api_tunes_a_user_kernel(cli_env):
    code = ("import json, tuner; r = tuner.tune('examples/add_relu_kernel.py:ADD_RELU', "
            "'N=2000', dtype='fp32', trials=2, backend='interpret', confirm_top=0); "
            "print(json.dumps(r.best))")
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (best,) = json.loads(proc.stdout.strip().splitlines()[-1])
    assert best["problem"] == {"N": 2000} and set(best["config"]) == {"BLOCK", "num_warps"}
    assert best["fraction"] > 0


@pytest.mark.parametrize(("args", "message"), [
    (["tune", "--kernel", "/etc/passwd.py:X", "--shape", "N=4"], "outside the allowed"),
    (["tune", "--kernel", "examples/add_relu_kernel.py:NOPE", "--shape", "N=4"],
     "has no attribute 'NOPE'"),
    (["tune", "--kernel", "tests/kernels/broken_kernel.py:SPEC", "--shape", "N=4"],
     "importing"),
    (["tune", "--kernel", "tests/kernels/not_a_spec.py:SPEC", "--shape", "N=4"],
     "not a KernelSpec"),
    (["tune", "--kernel", "tests/kernels/incomplete_spec.py:SPEC", "--shape", "N=4"],
     "missing"),
    (["tune", "attention", "--shape", "Z=1,H=1,S=8,D=48"], "head dim D=48"),
    (["tune"], "name the kernel"),
])
def test_bad_user_kernels_get_one_clear_line(cli_env, args, message):
    proc = run_cli_here(args, cli_env)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
