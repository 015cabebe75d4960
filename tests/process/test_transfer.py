"""Transfer: a new job starts from the best stored configs of related problems."""

from __future__ import annotations

import json
import math

import pytest

from db import repository as repo
from db.session import make_engine
from db.session import session_factory
from search_spaces import Context
from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tests.conftest import db_rows
from tests.conftest import replay_file
from tuner.app.local import run_local_job
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.core.types import TimingSettings
from tuner.kernels import resolve_kernel
from tuner.search.model_search import ModelSearch
from tuner.search.transfer import StoredBest
from tuner.search.transfer import measured_prior
from tuner.search.transfer import shape_distance
from tuner.search.transfer import transfer_configs
from tuner.views.jobs import prior_text

FAST = TimingSettings(warmup_ms=0, rep_ms=10, min_reps=2, max_reps=5)


def test_related_problems_rank_by_device_kind_then_shape_distance():
    assert shape_distance({"M": 4096, "N": 1024}, {"M": 2048, "N": 4096}) == 3.0
    assert shape_distance({"M": 1}, {"N": 1}) == float("inf")
    stored = [
        StoredBest({"M": 64, "N": 64}, "a100", {"c": "other-gpu-same-shape"}),
        StoredBest({"M": 4096, "N": 4096}, "h100-sxm", {"c": "far"}),
        StoredBest({"M": 128, "N": 64}, "h100-sxm", {"c": "near"}),
        StoredBest({"M": 256, "N": 64}, "h100-sxm", {"c": "near"}),  # same config: once
        StoredBest({"M": 512, "N": 64}, "h100-sxm", {"c": "middle"}),
    ]
    assert transfer_configs(stored, {"M": 64, "N": 64}, "h100-sxm", limit=3) == [
        {"c": "near"}, {"c": "middle"}, {"c": "far"}]
    assert transfer_configs(stored, {"M": 64, "N": 64}, "h100-sxm", limit=5)[-1] == {
        "c": "other-gpu-same-shape"}
    assert transfer_configs(stored, {"M": 64, "N": 64}, "h100-sxm", limit=0) == []


def test_default_search_measures_valid_warm_start_configs_first_and_skips_the_rest():
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space = recorded_space(rec)
    ctx = Context(rec.problem(), "fp32")
    first = {"between_method": 3, "block_size_x": 992, "tile_size": 2, "use_method": 2}
    second = {"between_method": 1, "block_size_x": 32, "tile_size": 20, "use_method": 0}
    not_in_space = {"between_method": "nine", "block_size_x": 32, "tile_size": 20,
                    "use_method": 0}  # no value of the space is near "nine": skipped
    renamed = {"BetweenMethod": 0, "BLOCK_SIZE_X": 1000, "tile_size": 2, "UseMethod": 1}
    search = ModelSearch(space, ctx, seed=0, warm_start=[first, not_in_space, second, renamed])
    assert [search.ask().config for _ in range(2)] == [first, second]
    # From a space that differs by names and grid: the nearest config of this space (992).
    assert search.ask().config == {"between_method": 0, "block_size_x": 992, "tile_size": 2,
                                   "use_method": 1}


def test_a_new_job_starts_from_the_best_config_stored_for_a_related_problem(settings):
    def tune(problem: dict[str, int], transfer: int) -> None:
        spec = JobSpec(kernel="matmul", problems=[problem], dtype="fp16", backend="interpret",
                       device_kind="cpu", seed=5, budget=Budget(trials=3), parallel=1,
                       timing=FAST, confirm_top=0, transfer=transfer)
        run_local_job(spec, resolve_kernel("matmul", "interpret", settings.kernel_roots), settings)

    def first_config(job_id: int) -> dict[str, int]:
        (row,) = db_rows(settings.db_url, "SELECT config FROM tuner_trials "
                                          f"WHERE job_id = {job_id} AND number = 0")
        return dict(json.loads(row.config))

    tune({"M": 64, "N": 64, "K": 64}, transfer=0)
    (best,) = db_rows(settings.db_url, "SELECT config FROM tuner_best_configs")
    stored = json.loads(best.config)
    without = first_config(1)  # job 1 started from the space's own seed configs
    tune({"M": 64, "N": 64, "K": 128}, transfer=3)
    assert first_config(2) == stored
    tune({"M": 64, "N": 64, "K": 256}, transfer=0)  # off: starts where job 1 did
    assert first_config(3) == without


def test_measured_prior_ranks_another_devices_results_and_has_no_opinion_elsewhere():
    prior = measured_prior([({"a": 1, "b": 1}, 0.5), ({"a": 2, "b": 1}, 0.25),
                            ({"a": 2, "b": 1}, 0.1), ({"a": 3, "b": 1}, None)])
    assert prior is not None
    assert prior({"a": 1, "b": 1}) == 0.0
    assert prior({"a": 2, "b": 1}) == pytest.approx(math.log(0.5))
    assert prior({"a": 3, "b": 1}) == -math.inf
    # Values the source measured, in a combination it did not: the median, no opinion.
    assert prior({"a": 1, "b": 1, "c": 0}) == 0.0  # a parameter the source lacks: no part
    sparse = measured_prior([({"a": 1, "b": 1}, 0.5), ({"a": 2, "b": 2}, 0.25),
                             ({"a": 3, "b": 2}, 0.4)])
    assert sparse is not None
    assert sparse({"a": 1, "b": 2}) == pytest.approx(math.log(0.4 / 0.5))  # the median
    # A value outside the source's grid: the nearest one it measured (9 -> 3).
    assert prior({"a": 9, "b": 1}) == -math.inf
    assert measured_prior([({"a": 1}, None)]) is None


def test_a_new_device_kind_starts_from_the_results_on_another(settings):
    """Job 1 tunes the convolution on an A6000; job 2, the same kernel and problem on an A4000,
    reads job 1's results (not its own device's) as its prior and measures job 1's best
    first."""
    def tune(recording: str, kind: str) -> int:
        spec = JobSpec(kernel="replay", problems=[{"p0": 4096, "p1": 4096}], dtype="fp32",
                       backend=f"replay:{replay_file(recording)}", device_kind=kind, seed=4,
                       budget=Budget(trials=15), parallel=1, confirm_top=0)
        kernel = resolve_kernel("replay", spec.backend, settings.kernel_roots)
        return run_local_job(spec, kernel, settings).job_id

    first = tune("convolution_A6000.json.gz", "nvidia-rtx-a6000")
    engine = make_engine(settings.db_url)
    with session_factory(engine)() as session:
        key = repo.problems_of(session, first)[0].problem_key
        kernel = repo.get_job(session, first).kernel  # the recording's kernel name
        there = repo.results_elsewhere(session, kernel, "fp32", key, "nvidia-rtx-a4000")
        assert repo.results_elsewhere(session, kernel, "fp32", key, "nvidia-rtx-a6000") == []
        assert repo.results_elsewhere(session, kernel, "fp16", key, "nvidia-rtx-a4000") == []
        # failures kept (seed 4: job 1's fifteen trials include failed configs)
        assert len(there) == 15 and any(r[1] is None for r in there)
        top = max(r[1] for r in there if r[1] is not None)
        tied = [r[0] for r in there if r[1] == top]  # configs can tie in stored fraction
    (stored,) = db_rows(settings.db_url, "SELECT config FROM tuner_best_configs")
    assert json.loads(stored.config) in tied  # job 1's stored best is one of its best results
    second = tune("convolution_A4000.json.gz", "nvidia-rtx-a4000")
    (row,) = db_rows(settings.db_url, "SELECT config FROM tuner_trials "
                                      f"WHERE job_id = {second} AND number = 0")
    assert json.loads(row.config) == json.loads(stored.config)
    # Which prior each search used and how far it trusted it, as status and the report say.
    first_prior, second_prior = (json.loads(r.prior) if r.prior else None for r in db_rows(
        settings.db_url, "SELECT prior FROM tuner_problems ORDER BY job_id"))
    assert first_prior is None  # nothing to start from: cold
    assert "15 results measured on other device kinds" in second_prior["source"]
    assert "stored best config" in second_prior["source"]
    assert 0.0 < second_prior["trust"] < 1.0  # the cold twin made some of the proposals
    assert -1.0 <= second_prior["agreement"] <= 1.0
    with session_factory(engine)() as session:
        text = prior_text(repo.problems_of(session, second)[0].prior)
    assert text.startswith("15 results measured") and "trusted" in text and "rank" in text
    assert prior_text(None) == "cold start (no prior)"
