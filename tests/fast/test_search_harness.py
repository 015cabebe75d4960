"""The search-efficiency harness's own arithmetic, on a real recording: random search's exact
expectation against sampling, Kernel Tuner's simulation under the project's budget, and the
held-out choice of the default's constants."""

from __future__ import annotations

import importlib.util
import inspect
import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.conftest import replay_file

sys.path.insert(0, str(ROOT))

from benchmarks import search_heldout as ho
from benchmarks.search_peers import fractions_of
from benchmarks.search_peers import random_exact
from benchmarks.search_runs import CONSTANTS
from benchmarks.search_runs import VARIANTS
from benchmarks.search_runs import recording
from benchmarks.search_runs import simulate
from tuner.search.model_search import ModelSearch


def test_random_search_exact_expectation_matches_sampling():
    rec = recording(str(replay_file("pnpoly_RTX_3090.json.gz")))
    exact = random_exact(rec, (1, 10, 50))
    f = fractions_of(rec)
    rng = np.random.default_rng(0)
    for b in (1, 10, 50):
        draws = np.array([f[rng.choice(len(f), b, replace=False)].max() for _ in range(4000)])
        assert abs(exact[str(b)]["mean"] - draws.mean()) < 4 * draws.std() / np.sqrt(4000)
        assert abs(exact[str(b)]["p10"] - np.quantile(draws, 0.1)) < 0.02
    assert exact["1"]["mean"] == pytest.approx(f.mean())
    assert exact["10"]["failed_share"] == pytest.approx((f == 0).mean())


@pytest.mark.skipif(importlib.util.find_spec("kernel_tuner") is None,
                    reason="Kernel Tuner is an optional benchmark extra")
def test_kernel_tuner_strategies_spend_the_same_budget_and_see_failed_configs():
    path = str(replay_file("pnpoly_RTX_3090.json.gz"))  # 318 of 4,092 configs fail
    run = simulate(path, "kt:random_sample", 0, 400)
    assert len(run.curve) == 400 and run.curve[-1] > 0.5
    # drawn among every recorded config, the failed ones included (~8 %): not hidden from it
    assert 0.02 < run.failed[-1] / 400 < 0.2
    assert run.failed == sorted(run.failed) and run.failed[0] <= 1  # counted as it goes


def test_held_out_choice_never_sees_the_left_out_file():
    cell = {"mean": 0.0, "p10": 0.0, "se": 0.0}

    def stats(good_on: dict[str, str]) -> dict:
        return {f: {c: {"10": {**cell, "mean": 1.0 if good_on[f] == c else 0.5,
                               "p10": 1.0 if good_on[f] == c else 0.5}}
                    for c in ("v:a", "v:b")} for f in good_on}

    s = stats({"conv_x": "v:a", "conv_y": "v:a", "gemm_z": "v:b", "pnpoly_w": "v:b",
               "pnpoly_v": "v:b", "pnpoly_u": "v:b"})
    assert set(ho.held_out(s, ["v:a", "v:b"], "file").values()) == {"v:b"}
    by_family = ho.held_out(s, ["v:a", "v:b"], "family")
    assert by_family["pnpoly_w"] == by_family["pnpoly_u"] == "v:a"  # chosen on conv + gemm
    assert by_family["conv_x"] == by_family["gemm_z"] == "v:b"
    assert ho.verdict({"mean": 0.9, "se": 0.01}, {"mean": 0.85, "se": 0.01})[2] == "ahead"
    assert ho.verdict({"mean": 0.9, "se": 0.05}, {"mean": 0.85, "se": 0.05})[2] == "within 2 se"
    assert ho.verdict({"mean": 1.0, "se": 0.0}, {"mean": 1.0, "se": 0.0})[2] == \
        "tie at the optimum"


def test_the_shipped_default_is_one_of_the_candidates():
    params = inspect.signature(ModelSearch.__init__).parameters
    shipped = {k: params[k].default for k in CONSTANTS}
    assert shipped in VARIANTS.values()
    assert all(set(consts) == set(shipped) for consts in VARIANTS.values())  # all constants
    # The constants chosen so far are among them.
    assert set(CONSTANTS) >= {"feasibility", "failed_in_model", "explore_after", "diverse_tops",
                              "pow2_features", "init", "alternatives_after", "alternatives",
                              "climb_patience"}


def test_the_seed_bias_benchmark_runs_each_range_on_its_own_seeds(tmp_path):
    out = tmp_path / "bias.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "seed_bias.py"),
                           str(replay_file("pnpoly_RTX_3090.json.gz")), "--starts", "0,7",
                           "--seeds", "2", "--jobs", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    for start in (0, 7):
        expected = np.mean([simulate(str(replay_file("pnpoly_RTX_3090.json.gz")), "default",
                                     seed, 10).curve[9] for seed in (start, start + 1)])
        cell = report["files"]["pnpoly_RTX_3090"][str(start)]
        assert cell["mean"][0] == pytest.approx(expected) and len(cell["se"]) == 3
    assert report["ranges"]["0"]["minus_reference"]["10"] == 0.0
    clash = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "seed_bias.py"),
                            "--starts", "0,1", "--seeds", "2"],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert clash.returncode == 2 and "overlap" in clash.stderr


def test_seed_bias_verdicts_pool_the_later_ranges_against_the_best_peer():
    from benchmarks.seed_bias import verdicts

    cell = {"mean": 0.5, "se": 0.01}
    saved = {"spaces": {"f": {"v:d": {b: {"mean": 0.9, "se": 0.01} for b in ("10", "20", "50")},
                              "tpe": {b: cell for b in ("10", "20", "50")},
                              "random": {b: {"mean": 0.4} for b in ("10", "20", "50")}}},
             "held_out": {"leave_one_file_out": {"f": {"chosen": "v:d"}}}}
    report = {"starts": [0, 100, 200], "files": {"f": {
        "0": {"mean": [0.9] * 3, "se": [0.01] * 3},
        "100": {"mean": [0.5, 0.2, 0.6], "se": [0.01] * 3},
        "200": {"mean": [0.5, 0.2, 0.6], "se": [0.01] * 3}}}}
    assert verdicts(saved, report) == {"cells": 3, "saved": {"ahead": 3},
                                       "other seeds": {"within": 1, "behind": 1, "ahead": 1}}


@pytest.mark.parametrize("script", ["search_efficiency.py", "search_transfer.py", "seed_bias.py"])
def test_a_saved_report_that_is_missing_or_not_json_is_one_error_line(script, tmp_path):
    not_json = tmp_path / "notes.txt"
    not_json.write_text("not a report\n")
    for path, says in ((tmp_path / "missing.json", "No such file"), (not_json, "not a JSON")):
        extra = ["--peers-from", str(path)] if script == "seed_bias.py" else []
        done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script),
                               "--render", str(path), *extra],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("error: ") and says in done.stderr, done.stderr
