"""The composition root reports a local job's progress as events (never to a console), and the
Python API is a thin layer over it."""

from __future__ import annotations

import pytest

from tests.conftest import replay_file
from tuner.app.local import run_local_job
from tuner.app.progress import Event
from tuner.app.progress import NewBest
from tuner.app.progress import ProblemProgress
from tuner.app.progress import WorkersStarting
from tuner.app.progress import describe
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.kernels import resolve_kernel


def test_a_local_job_reports_its_progress_as_events_and_prints_nothing(settings, capfd):
    backend = f"replay:{replay_file('pnpoly_RTX_3090.json.gz')}"
    spec = JobSpec(kernel="replay", problems=[{"p0": 20000000}], dtype="fp32", backend=backend,
                   device_kind="", sampler="random", seed=3, budget=Budget(trials=12),
                   parallel=2)
    events: list[Event] = []
    outcome = run_local_job(spec, resolve_kernel("replay", backend, settings.kernel_roots),
                            settings, events.append)
    assert not outcome.interrupted
    assert capfd.readouterr() == ("", "")  # nothing went to a console
    assert events[0] == WorkersStarting(2, backend)
    progress = [e for e in events if isinstance(e, ProblemProgress)]
    assert progress and progress[-1].done and progress[-1].measured == 12
    assert progress[-1].trials == 12 and progress[-1].problem_key == "p020000000"
    assert [p.measured for p in progress] == sorted(p.measured for p in progress)
    bests = [e for e in events if isinstance(e, NewBest)]
    assert bests, "a job with successful trials reports at least one best"
    fractions = [b.fraction or 0.0 for b in bests]
    assert fractions == sorted(fractions) and fractions[-1] == progress[-1].best_fraction
    assert all(describe(b).startswith("new best p020000000 #") for b in bests)


def test_the_api_tunes_and_returns_the_best_configs(settings, capfd, monkeypatch):
    import tuner

    monkeypatch.setenv("TUNER_CACHE_DIR", str(settings.cache_dir))
    monkeypatch.setenv("TUNER_KERNEL_ROOTS", str(settings.kernel_roots[0]))
    backend = f"replay:{replay_file('pnpoly_RTX_3090.json.gz')}"
    result = tuner.tune("replay", [], backend=backend, trials=8, sampler="random", seed=1,
                        db=settings.db_url, verbose=True)
    (best,) = result.best
    assert best["problem"] == {"p0": 20000000} and best["config"] and 0 < best["fraction"] <= 1
    err = capfd.readouterr().err
    assert "new best p020000000 #" in err  # verbose: the new bests, as plain lines
    with pytest.raises(ValueError, match="unknown kernel"):
        tuner.tune("no_such_kernel", "N=4", db=settings.db_url)
