"""The driver's stop rules, sampler seeds and budget accounting, through the real inline path
(`run_local_job`: local workers, SQLite, Optuna), on recorded spaces (replay) and the
interpreter."""

from __future__ import annotations

import optuna
import pytest

from db import repository as repo
from db.session import make_engine
from db.session import session_factory
from tests.conftest import FAULT_KERNEL
from tests.conftest import replay_file
from tuner.app.local import run_local_job
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.core.types import TimingSettings
from tuner.kernels import resolve_kernel


def _replay_spec(budget: Budget, sampler: str = "tpe", seed: int | None = 0,
                 parallel: int = 2) -> JobSpec:
    """The convolution recording: 4,362 recorded points of a 10,240-point grid."""
    backend = f"replay:{replay_file('convolution_A4000.json.gz')}"
    return JobSpec(kernel="replay", problems=[{"p0": 4096, "p1": 4096}], dtype="fp32",
                   backend=backend, device_kind="nvidia-rtx-a4000", sampler=sampler, seed=seed,
                   budget=budget, parallel=parallel)


def _run(settings, spec: JobSpec):
    kernel = resolve_kernel(spec.kernel, spec.backend, settings.kernel_roots)
    outcome = run_local_job(spec, kernel, settings)
    engine = make_engine(settings.db_url)
    with session_factory(engine)() as session:
        (problem,) = repo.problems_of(session, outcome.job_id)
        trials = repo.trials_of_job(session, outcome.job_id)
        job = repo.get_job(session, outcome.job_id)
        return job, problem, list(trials)


def _measured(trials):
    return [t for t in trials if t.duplicate_of is None and t.status not in ("invalid",
                                                                            "cancelled")]


def test_trial_budget_counts_only_measured_configs(settings):
    job, problem, trials = _run(settings, _replay_spec(Budget(trials=25), sampler="random"))
    assert job.status == "completed" and problem.status == "done"
    assert len(_measured(trials)) == problem.measured == 25
    assert "budget of 25 trials" in problem.stop_reason
    invalid = [t for t in trials if t.status == "invalid"]
    assert invalid and all(t.started_at is None and t.median_ms is None for t in invalid)
    assert len({t.config_hash for t in _measured(trials)}) == 25  # never measured twice


def test_target_fraction_stops_early(settings):
    _job, problem, _trials = _run(settings, _replay_spec(Budget(trials=500, target_fraction=0.5)))
    assert problem.best_fraction >= 0.5 and problem.measured < 500
    assert "target roofline fraction 0.5 reached" in problem.stop_reason


def test_patience_stops_after_trials_without_improvement(settings):
    _job, problem, _trials = _run(settings, _replay_spec(Budget(trials=500, patience=5)))
    assert problem.measured - problem.last_improvement >= 5
    assert problem.measured < 500 and "no improvement in 5 trials" in problem.stop_reason


def test_wall_time_budget(settings):
    spec = JobSpec(kernel="matmul", problems=[{"M": 64, "N": 64, "K": 64}],
                   dtype="fp32", backend="interpret", device_kind="cpu", sampler="random",
                   seed=0, budget=Budget(trials=10_000, wall_s=4.0), parallel=1,
                   timing=TimingSettings(warmup_ms=0, rep_ms=50, min_reps=3))
    _job, problem, _trials = _run(settings, spec)
    assert "time budget of 4 s spent" in problem.stop_reason
    assert 0 < problem.measured < 10_000
    elapsed = (problem.finished_at - problem.started_at).total_seconds()
    assert 4 <= elapsed < 30


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_same_seed_same_search(settings, tmp_path, sampler):
    """One trial in flight: the order of results, and so the search, is reproducible."""
    spec = _replay_spec(Budget(trials=15), sampler=sampler, seed=7, parallel=1)
    first = _run(settings, spec)[2]
    second = _run(settings.with_db(f"sqlite:///{tmp_path / 'other.db'}"), spec)[2]
    key = lambda ts: sorted(t.config_hash for t in _measured(ts))  # noqa: E731
    assert key(first) == key(second)


def test_grid_sampler_walks_every_valid_point_once(settings):
    spec = JobSpec(kernel=f"{FAULT_KERNEL}:WRONG_RESULT", problems=[{"N": 100}], dtype="fp32",
                   backend="interpret", device_kind="cpu", sampler="grid", seed=0,
                   budget=Budget(trials=100), parallel=2,
                   timing=TimingSettings(warmup_ms=0, rep_ms=5, min_reps=2))
    _job, problem, _trials = _run(settings, spec)
    assert problem.measured == 6 and "every valid config measured (6)" in problem.stop_reason
    study = optuna.load_study(study_name=problem.study_name, storage=settings.db_url)
    assert len({tuple(sorted(t.params.items())) for t in study.trials}) == 6
