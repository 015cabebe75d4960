"""Static checks, the model backend, confirmation and the default search, end to end."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from search_spaces import Context
from search_spaces import canonical_json
from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tests.conftest import ROOT
from tests.conftest import db_rows
from tests.conftest import replay_file
from tuner.app.local import run_local_job
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.core.types import TimingSettings
from tuner.kernels import resolve_kernel
from tuner.measure.bench_process import BenchProcess
from tuner.search import Told
from tuner.search.model_search import ModelSearch

UNCONSTRAINED = f"{ROOT / 'tests' / 'kernels' / 'unconstrained_matmul.py'}:UNCONSTRAINED"
FAST = TimingSettings(warmup_ms=0, rep_ms=10, min_reps=2, max_reps=5)


def _cfg(bm, bn, bk, stages, warps):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_warps": warps,
            "num_stages": stages}


def test_static_check_reads_real_compiler_figures_for_hopper(cache_dir):
    """Compiled for sm_90 on this CPU-only machine: registers, spills, shared memory."""
    proc = BenchProcess(compile_for="h100-sxm", cache_dir=cache_dir, kernel_roots=(ROOT,))
    try:
        def check(config):
            return proc.check(BenchmarkRequest(
                trial_id=1, attempt=1, job_id=1, kernel="matmul",
                problem={"M": 4096, "N": 4096, "K": 4096}, dtype="bf16", params=config,
                backend="cuda", device_kind="h100-sxm", mode="check"))

        ok = check(_cfg(128, 256, 64, 3, 8))
        assert (ok.status, ok.target, ok.smem_bytes, ok.spill_bytes) == ("ok", "sm_90",
                                                                        147456, 0)
        assert 128 <= ok.regs <= 255
        too_big = check(_cfg(128, 256, 64, 5, 8))  # 245,760 B > 232,448 B
        assert too_big.status == "out_of_resources" and too_big.smem_bytes == 245760
        spills = check(_cfg(256, 256, 64, 3, 4))  # 512 accumulator values per thread
        assert spills.status == "spills" and spills.spill_bytes > 0 and spills.regs == 255
    finally:
        proc.close()


def test_configs_failing_their_static_check_never_reach_a_backend(settings):
    spec = JobSpec(kernel=UNCONSTRAINED, problems=[{"M": 128, "N": 128, "K": 128}],
                   dtype="bf16", backend="interpret", device_kind="cpu", sampler="random",
                   seed=3, budget=Budget(trials=6), parallel=2, timing=FAST,
                   static_check="h100-sxm", confirm_top=0)
    kernel = resolve_kernel(spec.kernel, spec.backend, settings.kernel_roots)
    run_local_job(spec, kernel, settings)
    rows = db_rows(settings.db_url, "SELECT status, static_status, static_smem_bytes, "
                                  "started_at, median_ms, lease_owner FROM tuner_trials")
    rejected = [r for r in rows if r.static_status not in (None, "ok")]
    assert rejected, "the random sampler should propose some configs Hopper cannot run"
    for r in rejected:
        assert r.status == "invalid" and r.started_at is None and r.median_ms is None
        assert r.lease_owner is None  # no worker ever claimed it for a device
    measured = [r for r in rows if r.status == "ok"]
    assert len(measured) == 6 and all(r.static_status == "ok" for r in measured)
    assert all(r.static_smem_bytes <= 232448 for r in measured)


def test_model_backend_is_a_labelled_prediction_never_a_best_config(cli_env):
    proc = subprocess.run([sys.executable, "-m", "tuner.cli", "tune", "matmul", "--shape",
                           "M=2048,N=2048,K=2048", "--dtype", "bf16", "--backend",
                           "model:h100-sxm", "--trials", "10", "--seed", "0"],
                          env=cli_env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "PREDICTED" in proc.stdout
    db = f"sqlite:///{cli_env['TUNER_DATA_DIR']}/tuner.db"
    rows = db_rows(db, "SELECT score_basis, provenance FROM tuner_trials WHERE status = 'ok'")
    assert rows and all(r.score_basis == "predicted" for r in rows)
    assert all(json.loads(r.provenance)["prediction"] is True for r in rows)
    assert db_rows(db, "SELECT count(*) FROM tuner_best_configs")[0][0] == 0


def test_finalists_are_re_timed_interleaved_and_the_best_keeps_the_confirmed_time(settings):
    spec = JobSpec(kernel="matmul", problems=[{"M": 64, "N": 64, "K": 64}], dtype="fp16",
                   backend="interpret", device_kind="cpu", seed=0, budget=Budget(trials=5),
                   parallel=1, timing=FAST, confirm_top=3)
    kernel = resolve_kernel(spec.kernel, spec.backend, settings.kernel_roots)
    run_local_job(spec, kernel, settings)
    (problem,) = db_rows(settings.db_url, "SELECT stop_reason, confirm_status, best_trial_id "
                                        "FROM tuner_problems")
    assert problem.confirm_status == "done" and "re-timed interleaved" in problem.stop_reason
    finalists = db_rows(settings.db_url, "SELECT id, confirm_ms, confirm_n FROM tuner_trials "
                                       "WHERE confirm_ms IS NOT NULL")
    assert len(finalists) == 3 and all(f.confirm_n >= 2 for f in finalists)
    winner = min(finalists, key=lambda f: f.confirm_ms)
    assert problem.best_trial_id == winner.id
    (best,) = db_rows(settings.db_url, "SELECT trial_id, median_ms FROM tuner_best_configs")
    assert (best.trial_id, best.median_ms) == (winner.id, winner.confirm_ms)


def test_default_search_proposes_only_valid_unmeasured_configs_and_resumes():
    rec = load_recording(replay_file("convolution_A4000.json.gz"))
    space = recorded_space(rec)
    ctx = Context(rec.problem(), "fp32")
    search = ModelSearch(space, ctx, seed=1)
    seen = set()
    history = []
    for _ in range(30):
        asked = search.ask()
        key = canonical_json(asked.config)
        assert key not in seen and space.is_valid(asked.config, ctx)
        seen.add(key)
        entry = rec.entries[rec.key_of(asked.config)]
        fraction = None if isinstance(entry["time"], str) else rec.best_time_ms() / entry["time"]
        search.tell(asked.number, fraction)
        history.append(Told(asked.number, asked.config, True, fraction))
    resumed = ModelSearch(space, ctx, seed=2)
    resumed.rebuild(history)
    nxt = resumed.ask()
    assert nxt.number == 30 and canonical_json(nxt.config) not in seen


def test_prior_seeds_the_search_with_its_favourite():
    space = recorded_space(load_recording(replay_file("pnpoly_RTX_3090.json.gz")))
    ctx = Context({"p0": 20000000}, "fp32")
    favourite = {"between_method": 0, "block_size_x": 64, "tile_size": 20, "use_method": 0}
    search = ModelSearch(space, ctx, seed=0,
                         prior=lambda c: 0.0 if c == favourite else -1.0)
    assert search.ask().config == favourite


@pytest.mark.parametrize("search", ["default", "v:feas+explore", "tpe", "gp"])
def test_the_search_efficiency_harness_runs_every_search(search):
    sys.path.insert(0, str(ROOT))
    from benchmarks.search_runs import simulate

    run = simulate(str(replay_file("pnpoly_RTX_3090.json.gz")), search, 0, 12)
    curve: list[float] = run.curve
    assert len(curve) == 12 and all(0 <= a <= b <= 1 for a, b in itertools.pairwise(curve))
    assert len(run.failed) == 12 and run.failed[-1] <= 12 and run.ms
