"""The built-in fused-MoE kernel tuned per batch size on the interpreter, then exported as
the config files vLLM and SGLang read (``tuner export --format vllm-moe``)."""

from __future__ import annotations

import json

from tests.conftest import run_cli


def test_fused_moe_per_batch_size_exports_one_vllm_file(cli_env, tmp_path):
    db = f"sqlite:///{tmp_path / 'moe.db'}"
    tuned = run_cli(["tune", "fused_moe", "--shape", "M=1,E=4,N=64,K=64,topk=2",
                     "--shape", "M=8,E=4,N=64,K=64,topk=2", "--dtype", "fp16", "--trials",
                     "3", "--backend", "interpret", "--db", db], cli_env, timeout=600)
    assert tuned.returncode == 0, tuned.stdout[-2000:] + tuned.stderr[-2000:]
    out = tmp_path / "configs"
    exported = run_cli(["export", "--format", "vllm-moe", "--out", str(out), "--db", db],
                       cli_env)
    assert exported.returncode == 0, exported.stderr
    files = list(out.iterdir())
    assert len(files) == 1 and files[0].name.startswith("E=4,N=64,device_name=")
    configs = json.loads(files[0].read_text())
    assert list(configs) == ["1", "8"]
    assert configs["8"]["BLOCK_SIZE_K"] == 64  # the only K tile the problem's K=64 allows
