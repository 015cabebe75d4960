"""`tuner roofline`, `tuner profile` and `tuner plan` on real torch programs (CPU)."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from tests.conftest import run_cli
from tests.conftest import run_cli_here

MLP = "examples/mlp_block.py"
BLOCK = "examples/transformer_block.py"


def _json(args, env):
    return json.loads(run_cli([*args, "--json"], env, check=True).stdout)


def _accounted_once(plan: dict) -> None:
    """Each operator's time in one job: shares within the run, gains within its time."""
    jobs = plan["jobs"]
    assert sum(j["gain_share"] for j in jobs) <= 1.0
    assert sum(j["gain_ms"] for j in jobs) <= plan["wall_ms"]
    problems = [(j["kernel"], json.dumps(j["problem"]), j["dtype"]) for j in jobs]
    assert len(problems) == len(set(problems))


def test_roofline_tokens_for_a_transformer_matmul(cli_env):
    data = _json(["roofline", "--tokens-for", "K=8192,N=8192", "--dtype", "bf16"], cli_env)
    h100 = next(d for d in data["devices"] if d["device_kind"] == "h100-sxm")
    assert 280 <= h100["tokens"] <= 330
    answer = _json(["roofline", "matmul", "--shape", "M=8192,N=8192,K=8192", "--dtype",
                    "bf16", "--measured-ms", "1.5"], cli_env)
    assert answer["bound"] == "compute" and 0.7 < answer["fraction"] < 0.8


def test_profile_of_an_mlp_block(cli_env, tmp_path):
    chart = tmp_path / "roofline.png"
    p = _json(["profile", MLP, "--device-kind", "h100-sxm", "--chart", str(chart)], cli_env)
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 10_000
    assert sum(g["share"] for g in p["groups"]) + p["outside_share"] == pytest.approx(1.0)
    up = next(g for g in p["groups"] if g["op"] == "aten::linear"
              and g["shapes"][1] == [1024, 256])
    # 3 forward passes of Linear(256, 1024) on 256 tokens: 2·M·N·K + the bias, per call.
    assert up["calls"] == 3
    assert up["flops"] == 3 * (2 * 256 * 1024 * 256 + 256 * 1024)
    assert up["min_bytes"] == 3 * 4 * (256 * 256 + 1024 * 256 + 1024 + 256 * 1024)
    assert up["roof_ms_target"] > 0 and up["fraction"] > 0
    chains = {tuple(c["ops"]): c for c in p["chains"]}
    assert chains[("aten::linear", "aten::gelu")]["service_kernel"] == "matmul+bias+gelu"


def test_plan_for_a_transformer_block_submits_jobs(cli_env, tmp_path):
    db = f"sqlite:///{tmp_path / 'plan.db'}"
    plan = _json(["plan", BLOCK, "--trials", "120", "--submit", "--db", db], cli_env)
    jobs = plan["jobs"]
    kernels = [j["kernel"] for j in jobs]
    assert "matmul+bias" in kernels and "matmul+bias+gelu" in kernels, \
        json.dumps(plan)[:6000]  # matmuls and a chain (the whole plan, should it ever fail)
    assert sum(j["trials"] for j in jobs) == 120
    assert [j["gain_ms"] for j in jobs] == sorted((j["gain_ms"] for j in jobs), reverse=True)
    _accounted_once(plan)
    engine = sa.create_engine(db)
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT kernel FROM tuner_jobs ORDER BY id")).scalars()
        assert list(stored) == kernels
    engine.dispose()


def test_plan_reads_a_saved_profile(cli_env, tmp_path):
    out = tmp_path / "profile.json"
    run_cli(["profile", MLP, "--out", str(out)], cli_env, check=True)
    plan = _json(["plan", str(out), "--trials", "40"], cli_env)
    assert plan["jobs"] and sum(j["trials"] for j in plan["jobs"]) == 40
    _accounted_once(plan)


@pytest.mark.parametrize(("args", "message"), [
    (["profile", "examples/nope.py"], "no such script"),
    (["profile", "tests/kernels/broken_kernel.py"], "failed: RuntimeError"),
    (["profile", MLP, "--device-kind", "tpu"], "unknown device kind"),
    (["plan", "missing.json"], "cannot read the profile"),
    (["roofline"], "give a kernel"),
    (["roofline", "--tokens-for", "K=4096"], "needs K and N"),
    (["roofline", "softmax"], "--shape M=4096,N=4096"),
])
def test_bad_input_gets_one_line(cli_env, args, message):
    proc = run_cli_here(args, cli_env)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
