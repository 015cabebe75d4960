"""Database: migrations match the models; the compare-and-set writes."""

from __future__ import annotations

import threading

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from db import repository as repo
from db.migrate import current
from db.migrate import head
from db.migrate import upgrade
from db.models import Base
from db.session import make_engine
from db.session import session_factory


def _fresh(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    return engine, session_factory(engine)


def _job_with_trial(sessions) -> tuple[int, int]:
    with sessions.begin() as s:
        job = repo.add_job(s, kernel="k", kernel_source_hash="h", space_hash="s", dtype="fp32",
                           device_kind="cpu", backend="interpret", sampler="tpe", seed=0,
                           spec={}, status="running")
        problem = repo.add_problem(s, job_id=job.id, position=0, problem={"N": 1},
                                   problem_key="N1", study_name=f"k/N1/{job.id}")
        trial = repo.add_trial(s, job_id=job.id, problem_id=problem.id, number=0,
                               config={"B": 1}, config_hash="c", status="queued")
        return job.id, trial.id


def test_migrations_create_exactly_the_models(tmp_path):
    engine, _ = _fresh(tmp_path)
    assert current(engine) == head()
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={
            "include_object": lambda obj, name, type_, *a: type_ != "table"
            or (name.startswith("tuner_") and name != "tuner_alembic_version")})
        assert compare_metadata(ctx, Base.metadata) == []
    assert upgrade(f"sqlite:///{tmp_path / 'db.sqlite'}") == head()  # idempotent


def test_result_is_stored_once_per_attempt(tmp_path):
    _, sessions = _fresh(tmp_path)
    _, trial_id = _job_with_trial(sessions)
    with sessions.begin() as s:
        assert repo.claim_trial(s, trial_id, 1, "w1", 60)
        assert not repo.claim_trial(s, trial_id, 1, "w2", 60)  # already running
    with sessions.begin() as s:
        assert repo.store_result(s, trial_id, 1, {"status": "ok", "median_ms": 1.0})
    with sessions.begin() as s:  # a duplicate delivery of the same attempt changes nothing
        assert not repo.store_result(s, trial_id, 1, {"status": "crashed", "median_ms": 9.0})
        assert not repo.store_result(s, trial_id, 2, {"status": "ok", "median_ms": 9.0})
        t = repo.get_trial(s, trial_id)
        assert (t.status, t.median_ms) == ("ok", 1.0)


def test_expired_lease_is_requeued_then_lost_at_the_cap(tmp_path):
    _, sessions = _fresh(tmp_path)
    job_id, trial_id = _job_with_trial(sessions)
    for attempt in (1, 2):
        with sessions.begin() as s:
            assert repo.claim_trial(s, trial_id, attempt, "w", lease_s=-1)  # already expired
        with sessions.begin() as s:
            requeued, lost = repo.expire_leases(s, job_id, max_attempts=2)
        if attempt == 1:
            assert [t.attempt for t in requeued] == [2] and lost == []
        else:
            assert requeued == [] and [t.id for t in lost] == [trial_id]
    with sessions.begin() as s:  # the vanished worker's late result is refused
        assert not repo.store_result(s, trial_id, 2, {"status": "ok", "median_ms": 1.0})
        assert repo.get_trial(s, trial_id).status == "lost"


def test_best_config_only_improves_even_under_concurrent_offers(tmp_path):
    engine, sessions = _fresh(tmp_path)
    job_id, trial_id = _job_with_trial(sessions)
    key = dict(kernel="k", kernel_identity="builtin", problem={"N": 1}, problem_hash="p",
               problem_key="N1", dtype="fp32",
               device_kind="cpu", backend="interpret", median_ms=1.0, trial_id=trial_id,
               job_id=job_id, fingerprint={})
    results = {}

    def offer(fraction: float) -> None:
        with sessions.begin() as s:
            results[fraction] = repo.offer_best(s, config={"f": fraction}, fraction=fraction,
                                                **key)

    threads = [threading.Thread(target=offer, args=(f,)) for f in (0.3, 0.5, 0.4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with sessions.begin() as s:
        assert not repo.offer_best(s, config={"f": 0.1}, fraction=0.1, **key)
        rows = repo.best_configs(s)
        assert len(rows) == 1 and rows[0].fraction == 0.5 and rows[0].config == {"f": 0.5}
    assert results[0.5] is True
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM tuner_best_configs")).scalar() == 1


def test_cancel_refuses_late_results(tmp_path):
    _, sessions = _fresh(tmp_path)
    job_id, trial_id = _job_with_trial(sessions)
    with sessions.begin() as s:
        assert repo.cancel_job(s, job_id) == 1
    with sessions.begin() as s:
        assert not repo.claim_trial(s, trial_id, 1, "w", 60)
        assert repo.get_job(s, job_id).status == "cancelled"


def test_migration_0005_gives_stored_results_their_kernel_identity(tmp_path):
    """Rows from before identities: a built-in job's best config is ``builtin``, a file
    kernel's ``file:<its source hash>``, and the new key lets a same-named kernel in."""
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    upgrade(url, "0004")
    engine = make_engine(url)
    with engine.begin() as conn:
        for job_id, ref in ((1, "matmul"), (2, "/k/mine.py:MATMUL")):
            conn.execute(sa.text(
                "INSERT INTO tuner_jobs (id, kernel, kernel_source_hash, space_hash, dtype, "
                "device_kind, backend, sampler, spec, status, created_at) VALUES (:id, "
                "'matmul', :h, 's', 'fp16', 'cpu', 'interpret', 'auto', :spec, 'completed', "
                "'2026-01-01')"), {"id": job_id, "h": f"hash{job_id}" * 8,
                                    "spec": f'{{"kernel": "{ref}"}}'})
            conn.execute(sa.text(
                "INSERT INTO tuner_problems (id, job_id, position, problem, problem_key, "
                "study_name, status, measured, last_improvement, confirm_attempt) VALUES "
                "(:id, :id, 0, '{}', 'k', :name, 'done', 1, 0, 0)"),
                {"id": job_id, "name": f"s{job_id}"})
            conn.execute(sa.text(
                "INSERT INTO tuner_trials (id, job_id, problem_id, number, config, "
                "config_hash, status, attempt, told, queued_at) VALUES (:id, :id, :id, 0, "
                "'{}', 'c', 'ok', 1, 1, '2026-01-01')"), {"id": job_id})
        conn.execute(sa.text(
            "INSERT INTO tuner_best_configs (kernel, problem, problem_hash, problem_key, dtype, "
            "device_kind, backend, config, fraction, median_ms, trial_id, job_id, "
            "fingerprint, updated_at) VALUES ('matmul', '{}', 'p', 'k', 'fp16', 'cpu', "
            "'interpret', '{}', 0.5, 1.0, 1, 1, '{}', '2026-01-01')"))
    assert upgrade(url) == head()
    with engine.connect() as conn:
        jobs = conn.execute(sa.text(
            "SELECT id, kernel_identity FROM tuner_jobs ORDER BY id")).all()
        best = conn.execute(sa.text("SELECT kernel_identity FROM tuner_best_configs")).all()
    assert jobs == [(1, "builtin"), (2, "file:" + ("hash2" * 8)[:32])]
    assert best == [("builtin",)]
    with session_factory(engine).begin() as s:  # the same name, another identity: a new row
        assert repo.offer_best(s, kernel="matmul", kernel_identity="file:x", problem={},
                               problem_hash="p", problem_key="k", dtype="fp16",
                               device_kind="cpu", backend="interpret", config={}, fraction=0.1,
                               median_ms=1.0, trial_id=2, job_id=2, fingerprint={})
    engine.dispose()
