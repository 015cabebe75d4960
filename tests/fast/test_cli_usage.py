"""Usage errors through the CLI in-process (typer's runner): one line on stderr starting
``error:``, exit status 2, nothing written. ``tests/process/test_cli_errors.py`` runs two of
them through a real ``tuner`` process."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import ROOT
from tuner.cli.commands import app

EMPTY = str(ROOT / "tests" / "kernels" / "empty_space.py") + ":EMPTY"


@pytest.mark.parametrize(("args", "message"), [
    (["tune", "nosuch", "--shape", "N=1"], "unknown kernel 'nosuch'"),
    (["tune", "matmul", "--shape", "M=abc,N=1,K=1"], "dimension M must be an integer"),
    (["tune", "matmul", "--shape", "12x12"], "expected 3 sizes"),
    (["tune", "matmul", "--shape", "M=4,N=4"], "missing dimension(s) K"),
    (["tune", "matmul", "--shape", "M=4,N=4,K=4", "--dtype", "int3"], "unknown dtype 'int3'"),
    (["tune", "matmul", "--shape", "M=0,N=4,K=4"], "M must be positive, got 0"),
    (["tune", "matmul", "--shape", "M=4,N=-4,K=4"], "N must be positive, got -4"),
    (["tune", "matmul", "--shape", "M=4,N=4,K=4", "--trials", "0"], "at least 1"),
    (["tune", "matmul", "--shape", "M=4,N=4,K=4", "--backend", "tpu"], "unknown backend"),
    (["tune", "matmul", "--shape", "M=4,N=4,K=4", "--sampler", "magic"], "unknown sampler"),
    (["tune", "matmul", "--shape", "M=4,N=4,K=4", "--transfer", "-1"],
     "--transfer must be at least 0"),
    (["tune", "matmul", "--shape", "M=4,N=4,K=4", "--backend", "interpret", "--device-kind",
      "h100-sxm"], "runs on the host CPU"),
    (["tune", EMPTY, "--shape", "N=10", "--backend", "interpret"], "has no valid config"),
    (["tune", "/etc/passwd.py:X", "--shape", "N=10"], "outside the allowed kernel roots"),
    (["tune", "matmul", "--shape", "M=4,N=4,K=4", "--backend", "replay:/no/such.json.gz"],
     "cannot replay"),
    (["best", "matmul", "--shape", "M=4,N=4,K=4", "--dtype", "fp16", "--source", "/no/file"],
     "no such export file"),
    (["status", "3"], "no database"),
    (["status", "--json"], "no database"),
    (["workers"], "no database"),
    (["workers", "--json"], "no database"),
    (["export", "--out", "x.json", "--gpu", "h100-sxm"], "no database"),
    (["revalidate", "--kernel", "matmul", "--gpu", "h100-sxm"], "no database"),
    (["worker", "--device", "gpu"], "unknown device 'gpu'"),
    (["tune", "--missing", "/no/such.jsonl"], "cannot read /no/such.jsonl"),
    (["best", "matmul", "--shape", "M=-4,N=4,K=4", "--dtype", "fp16"], "M must be positive"),
    (["tune", "--captured", "/no/such.json"], "cannot read capture file /no/such.json"),
    (["tune", "--captured", "/etc/hostname"], "cannot read capture file"),
    (["tune", "--top", "2"], "give --captured FILE"),
    (["tune", "matmul", "--captured", "c.json"], "--captured names the kernels"),
    (["tune", "--captured", "c.json", "--missing", "m.jsonl"], "not both"),
    (["submit", "--min-share", "0.1"], "give --captured FILE"),
    (["capture"], "give the program to run after --"),
    (["export", "--format", "vllm"], "unknown --format 'vllm'"),
    (["export", "--format", "vllm-moe", "--kernel", "matmul"], "drop --kernel"),
    (["capture", "--", "/no/such/program"], "cannot run /no/such/program"),
    (["capture", "--", "true"], "launched no Triton kernel"),
])
def test_bad_input_is_one_line_and_writes_nothing(cli_env, args, message):
    result = CliRunner().invoke(app, args, env=cli_env)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert message in result.stderr
    assert not Path(cli_env["TUNER_DATA_DIR"]).exists()
