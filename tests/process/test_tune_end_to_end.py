"""`tuner tune` end to end on the interpreter: stored trials, lookup, export, dashboard."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import optuna
import pytest
import sqlalchemy as sa

from tests.conftest import ROOT
from tests.conftest import run_cli
from tuner.testing.services import free_port

SHAPE = "M=64,N=48,K=40"
PROBLEM = {"M": 64, "N": 48, "K": 40}


def _tune(env, db=None, extra=()):
    args = ["tune", "matmul", "--shape", SHAPE, "--dtype", "fp16", "--trials", "6",
            "--parallel", "2", "--backend", "interpret", "--seed", "0", *extra]
    if db:
        args += ["--db", db]
    return run_cli(args, env, check=True)


def _python(code: str, env) -> str:
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_tune_stores_every_trial_and_serves_the_best(cli_env, tmp_path):
    proc = _tune(cli_env)
    assert "best config:" in proc.stdout and "roofline fraction" in proc.stdout
    db_url = f"sqlite:///{tmp_path / 'data' / 'tuner.db'}"
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT status, median_ms, fraction, provenance, duplicate_of, config, confirm_ms, "
            "roof_ms FROM tuner_trials"
        )).all()
        best = conn.execute(sa.text("SELECT config, fraction FROM tuner_best_configs")).one()
    measured = [r for r in rows if r.status not in ("invalid", "cancelled") and
                r.duplicate_of is None]
    assert len(measured) == 6
    for r in measured:
        assert r.status == "ok" and r.median_ms > 0 and 0 < r.fraction < 1
        assert json.loads(r.provenance)["backend"] == "interpret"
    # The top three were re-timed interleaved (--confirm-top 3 by default); the fastest re-timed
    # one is served, with its re-timed fraction.
    finalists = [r for r in measured if r.confirm_ms is not None]
    assert len(finalists) == 3
    winner = min(finalists, key=lambda r: r.confirm_ms)
    assert json.loads(best.config) == json.loads(winner.config)
    assert best.fraction == pytest.approx(winner.roof_ms / winner.confirm_ms)

    # Every Optuna trial is finished; COMPLETE ones carry the metrics as user attrs.
    study = optuna.load_study(study_name="matmul/M64-N48-K40/fp16/cpu/job-1", storage=db_url)
    assert len(study.trials) == len(rows)
    assert all(t.state.is_finished() for t in study.trials)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 6
    assert {"median_ms", "tflops", "gbps", "bound", "status", "gpu"} <= set(
        complete[0].user_attrs)
    assert study.best_value == pytest.approx(max(r.fraction for r in measured))

    # Another process finds the same config, from the database...
    code = ("import json; from tuner import best_config; "
            f"print(json.dumps(best_config('matmul', {PROBLEM!r}, 'fp16', 'cpu')))")
    assert json.loads(_python(code, cli_env)) == json.loads(best.config)
    assert run_cli(["best", "matmul", "--shape", SHAPE, "--dtype", "fp16"], cli_env,
                   check=True).stdout.count("BLOCK_M") == 1

    # ...and from an exported file, without importing Optuna, Celery, torch or Triton.
    out = tmp_path / "best.json"
    run_cli(["export", "--out", str(out)], cli_env, check=True)
    code = ("import json, sys; from tuner import best_config; "
            f"c = best_config('matmul', {PROBLEM!r}, 'fp16', source={str(out)!r}); "
            "print(json.dumps([c, [m for m in ('optuna', 'celery', 'torch', 'triton') "
            "if m in sys.modules]]))")
    config, heavy = json.loads(_python(code, {**cli_env, "TUNER_DB_URL": "sqlite:///x"}))
    assert config == json.loads(best.config) and heavy == []
    # Another problem is served by the nearest tuned one, and says so; another dtype, with
    # nothing tuned, by the kernel's default (its first seed config).
    other = ("import json; from tuner import best_config; "
             f"c = best_config('matmul', {{'M': 1, 'N': 1, 'K': 1}}, 'fp16', "
             f"source={str(out)!r}); print(json.dumps([c, c.tier, c.problem, c.stale])); "
             f"print(best_config('matmul', {PROBLEM!r}, 'bf16', source={str(out)!r}).tier)")
    nearest, default = _python(other, cli_env).splitlines()
    assert json.loads(nearest) == [json.loads(best.config), "nearest", PROBLEM, False]
    assert default == "default"

    # A fresh process without the database launches the kernel with the exported config.
    launched = subprocess.run(
        [sys.executable, "examples/use_tuned_config.py", str(out)], cwd=ROOT, timeout=300,
        env={**cli_env, "TRITON_INTERPRET": "1", "TUNER_DB_URL": "sqlite:////nonexistent/x.db"},
        capture_output=True, text=True)
    assert launched.returncode == 0, launched.stderr
    assert "launched with the tuned config" in launched.stdout


def test_dashboard_serves_the_studies(cli_env):
    _tune(cli_env)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "dashboard", "--port",
                             str(port)], env=cli_env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies",
                                            timeout=5) as response:
                    data = json.loads(response.read())
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.5)
        names = [s["study_name"] for s in data["study_summaries"]]
        assert names == ["matmul/M64-N48-K40/fp16/cpu/job-1"]
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.integration
def test_tune_on_postgresql(cli_env, postgres):
    _tune(cli_env, db=postgres.url)
    code = ("import json; from tuner import best_config; "
            f"print(json.dumps(best_config('matmul', {PROBLEM!r}, 'fp16', 'cpu', "
            f"source={postgres.url!r})))")
    config = json.loads(_python(code, cli_env))
    assert config is not None and set(config) >= {"BLOCK_M", "num_warps"}
    status = run_cli(["status", "--db", postgres.url], cli_env, check=True)
    assert "completed" in status.stdout
