"""The composition root reports a local job's progress as events (never to a console), and the
Python API is a thin layer over it."""

from __future__ import annotations

import itertools

import pytest

from tests.conftest import replay_file
from tuner.app.local import run_local_job
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.kernels import resolve_kernel
from tuner.views.progress import Event
from tuner.views.progress import NewBest
from tuner.views.progress import ProblemProgress
from tuner.views.progress import WorkersStarting
from tuner.views.progress import describe


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


def test_a_registered_search_drives_a_job_without_editing_any_caller(settings):
    """A search added to the registry is accepted by the job's validation and used by its
    driver: here one that walks the recorded grid in order."""
    from db import repository as repo
    from db.session import make_engine
    from db.session import session_factory
    from search_spaces import Config
    from tuner.control.searches import SEARCHES
    from tuner.search import Asked

    class InOrder:
        def __init__(self, space, ctx):
            self.configs = iter(c for c in space.valid_configs(ctx))
            self.number = 0

        def rebuild(self, history) -> None:
            self.number = len(history)

        def ask(self) -> Asked | None:
            config: Config | None = next(self.configs, None)
            if config is None:
                return None
            self.number += 1
            return Asked(self.number - 1, config)

        def tell(self, number: int, fraction: float | None) -> None:
            return None

    SEARCHES.register("in-order", lambda space, ctx, seed, prior, warm: InOrder(space, ctx))
    try:
        backend = f"replay:{replay_file('pnpoly_RTX_3090.json.gz')}"
        kernel = resolve_kernel("replay", backend, settings.kernel_roots)
        spec = JobSpec(kernel="replay", problems=[{"p0": 20000000}], dtype="fp32",
                       backend=backend, device_kind="", sampler="in-order",
                       budget=Budget(trials=5))
        outcome = run_local_job(spec, kernel, settings)
    finally:
        SEARCHES.unregister("in-order")
    from search_spaces import Context

    first = list(itertools.islice(kernel.space.valid_configs(Context({"p0": 20000000}, "fp32")),
                                  5))
    engine = make_engine(settings.db_url)
    with session_factory(engine)() as session:
        trials = repo.trials_of_job(session, outcome.job_id)
        assert [dict(t.config) for t in trials] == first
    engine.dispose()
