"""Runs only with a CUDA GPU: `tuner tune --backend cuda` measures real timings."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
import torch

from tests.conftest import run_cli

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_tune_matmul_on_the_gpu(cli_env, tmp_path):
    proc = run_cli(["tune", "matmul", "--shape", "M=1024,N=1024,K=1024", "--dtype", "bf16",
                    "--backend", "cuda", "--trials", "8", "--seed", "0"], cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'data' / 'tuner.db'}")
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT status, median_ms, fraction, fraction_measured, device_kind, provenance "
            "FROM tuner_trials WHERE status = 'ok'")).all()
    assert rows
    for r in rows:
        assert r.median_ms > 0 and 0 < r.fraction < 1.2 and r.fraction_measured is not None
        assert '"compute_capability"' in r.provenance and r.device_kind != "cpu"


def test_compiling_ahead_keeps_compiles_off_the_gpu(cli_env, tmp_path):
    """The compile pool's binaries are cache hits in the bench process; the job's device time
    is accounted (how busy is a benchmark's claim: benchmarks/gpu/acceptance.py)."""
    import json

    proc = run_cli(["tune", "matmul", "--shape", "M=2048,N=2048,K=2048", "--dtype", "bf16",
                    "--backend", "cuda", "--trials", "16", "--seed", "0",
                    "--compile-procs", "4"], cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'data' / 'tuner.db'}")
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT phases FROM tuner_trials WHERE status = 'ok'")).all()
    phases = [json.loads(r.phases) if isinstance(r.phases, str) else r.phases for r in rows]
    assert phases and all(p["pipelined"] for p in phases)
    assert all(p["device_cache_hit"] is True for p in phases), phases  # loaded, not compiled
    status = run_cli(["status", "1", "--json"], cli_env)
    device_time = json.loads(status.stdout)[0]["device_time"]
    assert 0 < device_time["busy_fraction"] <= 1 and device_time["gpu_seconds"] > 0
