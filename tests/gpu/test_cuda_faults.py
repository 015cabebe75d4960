"""Runs only with a CUDA GPU: real CUDA faults become trial statuses and the job carries on.

A real out-of-memory error (the caching allocator asked for 16 TiB) is ``out_of_resources``;
a real illegal address (a store a TiB past the output) is a sticky CUDA error that poisons the
bench process's context: that trial fails and the next config runs in a fresh bench process.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import FAULT_KERNEL
from tests.conftest import db_rows
from tests.conftest import run_cli

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_real_cuda_faults_are_statuses_and_healthy_configs_still_run(cli_env, tmp_path):
    proc = run_cli(["tune", f"{FAULT_KERNEL}:CUDA_FAULTS", "--shape", "N=100000",
                    "--backend", "cuda", "--sampler", "grid", "--trials", "9", "--seed", "0",
                    "--compile-procs", "0", "--run-timeout", "60"], cli_env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = db_rows(f"sqlite:///{tmp_path / 'data' / 'tuner.db'}",
                   "SELECT config, status, error FROM tuner_trials")
    by_mode: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        mode = json.loads(r.config)["mode"]
        by_mode.setdefault(mode, []).append((r.status, r.error or ""))
    print(json.dumps(by_mode, indent=1))
    assert len(rows) == 9
    assert [s for s, _ in by_mode["ok"]] == ["ok"] * 3, by_mode
    assert all(s == "out_of_resources" and "out of memory" in e.lower()
               for s, e in by_mode["cuda_oom"]), by_mode["cuda_oom"]
    assert all(s == "crashed" and "illegal memory access" in e
               for s, e in by_mode["illegal_address"]), by_mode["illegal_address"]
