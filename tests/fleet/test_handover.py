"""Two drivers of one job and two mirrors of one study, on PostgreSQL: a scheduler that lost
its lease writes nothing more, a takeover waits for the writer it replaces, and mirrors that
race record each trial once. These are the races a two-scheduler fleet can hit (see
``test_two_schedulers_never_double_drive``), forced here instead of left to timing."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from typing import Any

import optuna
import pytest
import sqlalchemy as sa
import sqlalchemy.orm as so

from db import repository as repo
from db.migrate import ensure_schema
from db.models import Job
from db.models import Trial
from db.models import utcnow
from db.session import make_engine
from db.session import session_factory
from tests.conftest import ROOT
from tests.conftest import replay_file
from tuner.app.local import run_local_job
from tuner.control.driver import JobDriver
from tuner.control.driver import LeaseLost
from tuner.control.jobs import create_job
from tuner.core.settings import Settings
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.kernels import KernelSpec
from tuner.kernels import resolve_kernel
from tuner.optuna.mirror import Mirror
from tuner.optuna.mirror import frozen_trial
from tuner.optuna.mirror import trial_record
from tuner.optuna.storage import storage_for

pytestmark = pytest.mark.integration


class _Queue:
    """Keeps what it is given; runs nothing."""

    def __init__(self) -> None:
        self.sent: list[int] = []

    def submit(self, request: BenchmarkRequest) -> None:
        self.sent.append(request.trial_id)

    def wait(self, timeout_s: float) -> None:
        return None

    def epoch(self) -> str | None:
        return None

    def close(self) -> None:
        return None


@pytest.fixture()
def pg(postgres, tmp_path, cache_dir) -> Iterator[tuple[Settings, so.sessionmaker[so.Session]]]:
    url = postgres.create_database(f"handover_{tmp_path.name[-12:]}")
    engine = make_engine(url)
    ensure_schema(engine)
    yield Settings(db_url=url, cache_dir=cache_dir, kernel_roots=(ROOT,)), session_factory(engine)
    engine.dispose()


def _spec(trials: int) -> JobSpec:
    return JobSpec(kernel="replay", problems=[{"p0": 4096, "p1": 4096}], dtype="fp32",
                   backend=f"replay:{replay_file('convolution_A4000.json.gz')}",
                   device_kind="nvidia-rtx-a4000", sampler="random", seed=0,
                   budget=Budget(trials=trials), parallel=2)


def _kernel(settings: Settings, spec: JobSpec) -> KernelSpec:
    return resolve_kernel(spec.kernel, spec.backend, settings.kernel_roots)


def _trial_rows(sessions: so.sessionmaker[so.Session], job_id: int) -> list[Any]:
    with sessions() as session:
        return [tuple(r) for r in session.execute(
            sa.select(Trial.id, Trial.status, Trial.told, Trial.published_at)
            .where(Trial.job_id == job_id).order_by(Trial.id)).all()]


def _expire_lease(sessions: so.sessionmaker[so.Session], job_id: int) -> None:
    with sessions.begin() as session:
        session.execute(sa.update(Job).where(Job.id == job_id)
                        .values(driver_lease_until=utcnow() - dt.timedelta(seconds=1)))


def test_a_driver_that_lost_its_lease_writes_nothing(pg):
    settings, sessions = pg
    spec = _spec(20)
    kernel = _kernel(settings, spec)
    job_id = create_job(sessions, settings.db_url, spec, kernel).job_id
    mirror = Mirror(sessions, settings.db_url)
    with sessions.begin() as session:
        assert repo.lease_job(session, job_id, "s1", 30)
    first = JobDriver(sessions, settings.db_url, job_id, kernel, _Queue(), mirror,
                      lease=("s1", 30))
    assert first.step()
    with sessions.begin() as session:
        assert not repo.lease_job(session, job_id, "s2", 30)  # s1's lease is live
    _expire_lease(sessions, job_id)  # s1 stalls past its lease …
    with sessions.begin() as session:
        assert repo.lease_job(session, job_id, "s2", 30)  # … and s2 takes the job over
    queued = [r[0] for r in _trial_rows(sessions, job_id) if r[1] == "queued"]
    assert len(queued) == 2
    with sessions.begin() as session:  # a worker's result arrives: a step would tell it
        session.execute(sa.update(Trial).where(Trial.id == queued[0]).values(
            status="ok", fraction=0.5, median_ms=1.0, finished_at=utcnow()))
    before = _trial_rows(sessions, job_id)
    with pytest.raises(LeaseLost):
        first.step()
    assert _trial_rows(sessions, job_id) == before  # not told, nothing new proposed
    second = JobDriver(sessions, settings.db_url, job_id, kernel, _Queue(), mirror,
                       lease=("s2", 30))
    assert second.step()
    after = _trial_rows(sessions, job_id)
    assert [r[2] for r in after if r[0] == queued[0]] == [True]  # the new driver told it
    assert len([r for r in after if r[1] == "queued"]) == 2  # and sent one more
    with sessions() as session:
        job = repo.get_job(session, job_id)
        assert job is not None and job.driver_owner == "s2"
        assert job.driver_lease_until > utcnow() + dt.timedelta(seconds=20)  # renewed


def test_a_takeover_waits_for_the_writer_it_replaces(pg):
    settings, sessions = pg
    spec = _spec(20)
    kernel = _kernel(settings, spec)
    job_id = create_job(sessions, settings.db_url, spec, kernel).job_id
    with sessions.begin() as session:
        assert repo.lease_job(session, job_id, "s1", 30)
    driver = JobDriver(sessions, settings.db_url, job_id, kernel, _Queue(),
                       Mirror(sessions, settings.db_url), lease=("s1", 30))
    _expire_lease(sessions, job_id)  # lapsed, but s1 is still alive and writing
    took: list[bool] = []

    def take_over() -> None:
        with sessions.begin() as session:
            took.append(repo.lease_job(session, job_id, "s2", 30))

    with driver.transaction():  # renews s1's lease and holds the job's row
        thread = threading.Thread(target=take_over)
        thread.start()
        thread.join(timeout=1.0)
        assert thread.is_alive()  # the takeover waits for s1's transaction
    thread.join(timeout=30)
    assert took == [None]  # s1 renewed its lease in that transaction: no takeover


def _finish_queued(sessions: so.sessionmaker[so.Session], job_id: int) -> None:
    with sessions.begin() as session:  # workers' results arrive
        session.execute(sa.update(Trial).where(Trial.job_id == job_id,
                                               Trial.status == "queued").values(
            status="ok", fraction=0.5, median_ms=1.0, finished_at=utcnow()))


def test_a_scheduler_that_retakes_a_job_rebuilds_its_driver(pg):
    """s1 drives, stalls; s2 takes the job over, drives it on and dies; s1 takes it back. Its
    cached driver has missed s2's trials: it must rebuild from the database, or it would reuse
    trial numbers (the unique constraint would stop it)."""
    from tuner.control.scheduler import Scheduler

    settings, sessions = pg
    spec = _spec(20)
    kernel = _kernel(settings, spec)
    job_id = create_job(sessions, settings.db_url, spec, kernel).job_id
    s1, s2 = (Scheduler(sessions, settings, _Queue(), name=n, kernel_loader=lambda _: kernel)
              for n in ("s1", "s2"))
    s1.tick()
    assert job_id in s1.drivers
    _expire_lease(sessions, job_id)  # s1 stalls …
    for _ in range(3):  # … s2 takes over and drives on
        _finish_queued(sessions, job_id)
        s2.tick()
    _expire_lease(sessions, job_id)  # s2 dies
    _finish_queued(sessions, job_id)
    s1.tick()  # s1 takes the job back
    s1.tick()
    with sessions() as session:
        numbers = list(session.scalars(sa.select(Trial.number).where(Trial.job_id == job_id)))
        owner = repo.get_job(session, job_id).driver_owner  # type: ignore[union-attr]
    assert owner == "s1"
    assert len(numbers) == len(set(numbers)) >= 8


@pytest.mark.parametrize("bulk", [True, False], ids=["bulk", "public-api"])
def test_racing_mirrors_record_each_trial_once(pg, monkeypatch, bulk):
    settings, sessions = pg
    spec = _spec(12)
    outcome = run_local_job(spec, _kernel(settings, spec), settings)
    space = _kernel(settings, spec).space
    # Mirror the finished job again into a fresh study, from two "processes" at once.
    storage = storage_for(settings.db_url)
    optuna.create_study(storage=storage, study_name="again", direction="maximize")
    with sessions.begin() as session:
        session.execute(sa.text("UPDATE tuner_problems SET study_name = 'again' "
                                "WHERE job_id = :j"), {"j": outcome.job_id})
        session.execute(sa.update(Trial).where(Trial.job_id == outcome.job_id)
                        .values(optuna_trial_id=None))
        ours = sorted(session.scalars(sa.select(Trial.id).where(
            Trial.job_id == outcome.job_id)).all())
        first = session.get(Trial, ours[0])
        assert first is not None
        if not bulk:  # a process that died after writing trial 1 to Optuna, before noting it
            storage.create_new_trial(storage.get_study_id_from_name("again"),
                                     template_trial=frozen_trial(trial_record(first, space)))
    both_read = threading.Barrier(2, timeout=30)
    read = repo.unmirrored_trials

    def read_then_wait(session: so.Session, job_id: int, limit: int) -> list[Any]:
        pending = read(session, job_id, limit)
        if pending:
            both_read.wait()  # each mirror holds the same batch before either writes
        return pending

    monkeypatch.setattr(repo, "unmirrored_trials", read_then_wait)  # as the mirror reads it
    mirrors = [Mirror(sessions, settings.db_url) for _ in range(2)]
    for m in mirrors:
        m.bulk = bulk
    errors: list[BaseException] = []

    def run(m: Mirror) -> None:
        try:
            assert m.sync(outcome.job_id, space, limit=1000) == len(ours)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(m,)) for m in mirrors]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    study = optuna.load_study(study_name="again", storage=settings.db_url)
    recorded = sorted(t.user_attrs["tuner_trial_id"] for t in study.trials)
    assert recorded == ours
    with sessions() as session:
        noted = dict(session.execute(sa.select(Trial.id, Trial.optuna_trial_id)
                                     .where(Trial.job_id == outcome.job_id)).all())
    assert noted == {t.user_attrs["tuner_trial_id"]: t._trial_id for t in study.trials}
