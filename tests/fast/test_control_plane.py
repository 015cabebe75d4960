"""The control plane in one process: the driver, the inline queue, in-process workers on the
replay and model backends, and SQLite. What a job decides (stop rules, budget, duplicates,
confirmation, best-config offers) and what a ticket may ask for, in seconds."""

from __future__ import annotations

import math
from typing import Any

import pytest

from db import repository as repo
from db.models import Trial
from db.session import make_engine
from db.session import session_factory
from tests.conftest import replay_file
from tuner.app.local import run_local_job
from tuner.control.tickets import PoisonTicket
from tuner.control.tickets import Ticket
from tuner.control.tickets import dead_letter
from tuner.control.tickets import load_request
from tuner.core.settings import Settings
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.kernels import resolve_kernel

PNPOLY = f"replay:{replay_file('pnpoly_RTX_3090.json.gz')}"


def _replay(budget: Budget, **spec: Any) -> JobSpec:
    base: dict[str, Any] = dict(kernel="replay", problems=[{"p0": 20000000}], dtype="fp32",
                                backend=PNPOLY, device_kind="", sampler="random", seed=1,
                                budget=budget, parallel=2)
    return JobSpec(**{**base, **spec})


def _run(settings: Settings, spec: JobSpec) -> tuple[Any, Any, list[Trial], Any]:
    outcome = run_local_job(spec, resolve_kernel(spec.kernel, spec.backend), settings)
    with session_factory(make_engine(settings.db_url))() as session:
        (problem,) = repo.problems_of(session, outcome.job_id)
        trials = list(repo.trials_of_job(session, outcome.job_id))
        best = list(repo.best_configs(session))
        return repo.get_job(session, outcome.job_id), problem, trials, best


def _measured(trials: list[Trial]) -> list[Trial]:
    return [t for t in trials if t.duplicate_of is None and t.status not in ("invalid",
                                                                            "cancelled")]


def test_the_trial_budget_counts_measured_configs_and_each_is_measured_once(settings) -> None:
    job, problem, trials, _ = _run(settings, _replay(Budget(trials=20)))
    measured = _measured(trials)
    assert job.status == "completed" and problem.status == "done"
    assert len(measured) == problem.measured == 20 and "budget of 20 trials" in \
        problem.stop_reason
    assert len({t.config_hash for t in measured}) == 20
    by_id = {t.id: t for t in trials}
    for dup in (t for t in trials if t.duplicate_of is not None):  # answered from the first
        assert by_id[dup.duplicate_of].config_hash == dup.config_hash


def test_patience_and_target_stop_a_problem_early(settings) -> None:
    _, problem, _, _ = _run(settings, _replay(Budget(trials=300, patience=4)))
    assert problem.measured < 300 and "no improvement in 4 trials" in problem.stop_reason
    assert problem.measured - problem.last_improvement >= 4


def test_the_best_measured_config_is_offered_and_a_recording_is_not_re_timed(settings) -> None:
    _, problem, trials, best = _run(settings, _replay(Budget(trials=15), confirm_top=3))
    fastest = min((t for t in _measured(trials) if t.status == "ok"),
                  key=lambda t: t.median_ms or math.inf)
    assert problem.best_trial_id == fastest.id
    assert problem.confirm_status in ("skipped", None)  # recorded times have no noise
    (row,) = best
    assert row.config == fastest.config and row.median_ms == pytest.approx(fastest.median_ms)


def test_predictions_are_never_offered_as_best_configs(settings) -> None:
    spec = JobSpec(kernel="matmul", problems=[{"M": 512, "N": 512, "K": 512}], dtype="fp16",
                   backend="model:h200", device_kind="h200", sampler="random", seed=0,
                   budget=Budget(trials=10), parallel=1)
    job, problem, _, best = _run(settings, spec)
    assert job.status == "completed" and problem.measured == 10
    assert problem.best_fraction and problem.best_fraction > 0
    assert best == []  # a prediction is labelled, never served
    assert problem.confirm_status in ("skipped", None)


def test_tickets_ask_only_for_work_that_still_waits_and_dead_letters_count(settings) -> None:
    job, _, trials, _ = _run(settings, _replay(Budget(trials=3)))
    done = _measured(trials)[0]
    with session_factory(make_engine(settings.db_url))() as session:
        # a finished trial: a late or repeated delivery finds nothing to do
        assert load_request(session, Ticket("bench", done.id, done.attempt)) is None
        assert dead_letter(session, Ticket("bench", 99_999, 1), "boom") == ("no such trial",
                                                                             None)
        # a queued trial: each failed delivery moves it on, the last makes it lost
        queued = repo.add_trial(session, job_id=job.id, problem_id=done.problem_id,
                                number=1000, config={"block_size_x": 32}, config_hash="q",
                                status="queued", attempt=1)
        session.commit()
        assert dead_letter(session, Ticket("bench", queued.id, 1), "bad row")[0] == "requeued"
        assert dead_letter(session, Ticket("bench", queued.id, 1), "again")[0] == "moved on"
        assert dead_letter(session, Ticket("bench", queued.id, 2), "bad row")[0] == "requeued"
        assert dead_letter(session, Ticket("bench", queued.id, 3), "bad row")[0] == "lost"
        session.commit()
        session.expire_all()
        lost = repo.get_trial(session, queued.id)
        assert lost is not None and lost.status == "lost" and "3 failed deliveries" in lost.error
        # a job whose stored spec is unusable poisons its tickets (no worker can run them)
        row = repo.get_job(session, job.id)
        row.spec = {**row.spec, "parallel": -1}
        other = repo.add_trial(session, job_id=job.id, problem_id=done.problem_id,
                               number=1001, config={"block_size_x": 64}, config_hash="p",
                               status="queued", attempt=1)
        session.commit()
        with pytest.raises(PoisonTicket):
            load_request(session, Ticket("bench", other.id, 1))


@pytest.mark.parametrize("data", [{"mode": "bench", "ref": 1}, {"mode": "exec", "ref": 1,
                                  "attempt": 1}, {"mode": "bench", "ref": 0, "attempt": 1},
                                  {"mode": "bench", "ref": 1, "attempt": 1, "backend": "x"}])
def test_a_ticket_carries_a_mode_a_row_and_an_attempt_and_nothing_else(data) -> None:
    with pytest.raises(ValueError):
        Ticket.from_json(data)
