"""Fault tests of the distributed service: real PostgreSQL, real redis-server, real `tuner
worker` (Celery) and `tuner scheduler` processes. Each ends with the job finished and every
trial recorded exactly once (``Fleet.assert_exactly_once``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import FAULT_KERNEL
from tests.fleet.fleet import Fleet
from tuner.core.types import BenchmarkRequest

pytestmark = pytest.mark.integration

SLOW = f"{FAULT_KERNEL}:SLOW"
FAST = ["--backend", "interpret", "--rep-ms", "5", "--seed", "0"]


def _running_trial(fleet: Fleet, job_id: int) -> tuple[int, str]:
    rows = fleet.rows("SELECT id, lease_owner FROM tuner_trials WHERE job_id = :j AND "
                      "status = 'running'", j=job_id)
    return (rows[0][0], rows[0][1]) if rows else (0, "")


def test_two_workers_share_one_queue(fleet):
    fleet.start_worker("w1")
    fleet.start_worker("w2")
    fleet.start_scheduler()
    job = fleet.submit(f"{FAULT_KERNEL}:SLOW", "--shape", "N=1000", "--trials", "10",
                       "--parallel", "2", "--sampler", "grid", *FAST)
    fleet.wait_finished(job)
    fleet.assert_exactly_once(job)
    done = dict(fleet.rows("SELECT name, trials_done FROM tuner_workers"))
    assert done["w1@fleet"] > 0 and done["w2@fleet"] > 0 and sum(done.values()) == 10


def test_worker_killed_mid_trial(fleet):
    fleet.start_worker("w1")
    fleet.start_scheduler()
    job = fleet.submit(SLOW, "--shape", "N=1000", "--trials", "4", "--parallel", "1",
                       "--sampler", "grid", *FAST)
    fleet.wait(lambda: _running_trial(fleet, job)[0] > 0, 60, "a running trial")
    trial_id, owner = _running_trial(fleet, job)
    assert owner == "w1@fleet"
    fleet.kill("w1")  # the whole worker: main process, pool process, bench process
    fleet.start_worker("w2")
    fleet.wait_finished(job)
    fleet.assert_exactly_once(job)
    attempt, status, last_owner = fleet.rows(
        "SELECT attempt, status, lease_owner FROM tuner_trials WHERE id = :t", t=trial_id)[0]
    assert (attempt, status, last_owner) == (2, "ok", "w2@fleet")


def test_bench_process_crash_and_hang(fleet):
    fleet.start_worker("w1")
    fleet.start_scheduler()
    crash = fleet.submit(f"{FAULT_KERNEL}:SIGNAL", "--shape", "N=1000", "--trials", "6",
                         "--parallel", "2", "--sampler", "grid", *FAST)
    hang = fleet.submit(f"{FAULT_KERNEL}:HANG_RUN", "--shape", "N=1000", "--trials", "6",
                        "--parallel", "2", "--sampler", "grid", "--run-timeout", "3", *FAST)
    for job, status in ((crash, "crashed"), (hang, "timeout")):
        fleet.wait_finished(job)
        fleet.assert_exactly_once(job)
        statuses = sorted(r[0] for r in fleet.rows(
            "SELECT status FROM tuner_trials WHERE job_id = :j", j=job))
        assert statuses == sorted(["ok"] * 3 + [status] * 3)
    assert "w1" in fleet.procs and fleet.procs["w1"].poll() is None  # the worker carried on


def test_redis_stopped_and_restarted_mid_job(fleet):
    fleet.start_worker("w1")
    fleet.start_scheduler()
    job = fleet.submit(SLOW, "--shape", "N=1000", "--trials", "8", "--parallel", "2",
                       "--sampler", "grid", *FAST)
    fleet.wait(lambda: _running_trial(fleet, job)[0] > 0, 60, "a running trial")
    fleet.redis.stop()  # keeps nothing on disk: every queued message is lost
    time.sleep(4)
    fleet.redis.start()
    fleet.wait_finished(job, timeout_s=240)
    fleet.assert_exactly_once(job)


def test_scheduler_killed_and_restarted_mid_job(fleet):
    fleet.start_worker("w1")
    fleet.start_scheduler("s1")
    job = fleet.submit(SLOW, "--shape", "N=1000", "--trials", "8", "--parallel", "2",
                       "--sampler", "grid", *FAST)
    fleet.wait(lambda: fleet.rows("SELECT count(*) FROM tuner_trials WHERE job_id = :j AND "
                                  "status = 'ok'", j=job)[0][0] >= 2, 90, "two results")
    fleet.kill("s1")
    fleet.start_scheduler("s2")
    fleet.wait_finished(job)
    fleet.assert_exactly_once(job)
    assert "drives job" in fleet.log("s2")


def test_two_schedulers_never_double_drive(fleet):
    fleet.start_worker("w1")
    fleet.start_scheduler("s1")
    fleet.start_scheduler("s2")
    jobs = [fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", f"N={n}", "--trials", "6",
                         "--parallel", "2", "--sampler", "grid", *FAST) for n in (100, 200)]
    for job in jobs:
        fleet.wait_finished(job)
        fleet.assert_exactly_once(job)
        assert fleet.rows("SELECT count(*) FROM tuner_trials WHERE job_id = :j",
                          j=job)[0][0] == 6  # no extra proposals from a second driver


def test_same_message_delivered_twice(fleet, monkeypatch):
    """An in-process scheduler whose queue publishes every request twice."""
    from db.session import make_engine
    from db.session import session_factory
    from tuner.control.scheduler import Scheduler
    from tuner.core.settings import Settings
    from workers.celery_app import configure
    from workers.dispatch import CeleryQueue

    class TwiceQueue(CeleryQueue):
        def submit(self, request: BenchmarkRequest) -> None:
            super().submit(request)
            super().submit(request)

    fleet.start_worker("w1")
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "6",
                       "--parallel", "2", "--sampler", "grid", *FAST)
    settings = Settings.from_env(fleet.env)
    engine = make_engine(settings.db_url)
    scheduler = Scheduler(session_factory(engine), settings,
                          TwiceQueue(configure(settings), settings.broker_url), poll_s=0.2)
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    thread.start()
    try:
        fleet.wait_finished(job)
    finally:
        stop.set()
        thread.join(timeout=30)
        engine.dispose()
    fleet.wait(lambda: "no longer queued; dropped" in fleet.log("w1"), 30, "a dropped copy")
    fleet.assert_exactly_once(job)


def test_pickled_message_is_refused_not_executed(fleet, tmp_path):
    marker = tmp_path / "pwned"
    fleet.start_worker("w1")
    code = f"""
import os
from celery import Celery
class Evil:
    def __reduce__(self):
        return (os.system, ("touch {marker}",))
app = Celery(broker={fleet.redis.url!r})
app.conf.accept_content = ["pickle", "json"]
app.send_task("tuner.bench", args=[Evil()], queue="cpu", serializer="pickle")
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    fleet.wait(lambda: "Refusing to deserialize" in fleet.log("w1")
               or "disallowed" in fleet.log("w1").lower(), 30, "the refusal in the log")
    time.sleep(1)
    assert not marker.exists()
    assert fleet.procs["w1"].poll() is None  # no crash
    fleet.start_scheduler()
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "6",
                       "--parallel", "2", "--sampler", "grid", *FAST)
    fleet.wait_finished(job)
    fleet.assert_exactly_once(job)


def test_cancel_while_trials_are_queued(fleet):
    fleet.start_scheduler()  # no worker yet: published trials wait in Redis
    job = fleet.submit(SLOW, "--shape", "N=1000", "--trials", "8", "--parallel", "4",
                       "--sampler", "grid", *FAST)
    fleet.wait(lambda: fleet.rows("SELECT count(*) FROM tuner_trials WHERE job_id = :j AND "
                                  "status = 'queued' AND published_at IS NOT NULL",
                                  j=job)[0][0] == 4, 60, "four published trials")
    out = fleet.cli("cancel", str(job))
    assert out.returncode == 0 and "4 queued trial(s) will not run" in out.stdout
    fleet.start_worker("w1")
    fleet.wait_finished(job)
    fleet.assert_exactly_once(job, status="cancelled")
    assert fleet.rows("SELECT sum(trials_done) FROM tuner_workers")[0][0] == 0
    fleet.wait(lambda: fleet.log("w1").count("no longer queued; dropped") >= 4, 30,
               "four dropped deliveries")


def test_duplicate_submission(fleet):
    args = ["--shape", "N=1000", "--trials", "6", "--parallel", "2", "--sampler", "grid",
            "--idempotency-key", "nightly-17", *FAST]
    first = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", *args)
    again = fleet.cli("submit", f"{FAULT_KERNEL}:WRONG_RESULT", *args)
    assert again.returncode == 0 and f"job {first} (already submitted" in again.stdout
    other = fleet.cli("submit", f"{FAULT_KERNEL}:WRONG_RESULT", *args, "--trials", "7")
    assert other.returncode == 2 and "already used" in other.stderr
    fleet.start_worker("w1")
    fleet.start_scheduler()
    fleet.wait_finished(first)
    fleet.assert_exactly_once(first)
    assert fleet.rows("SELECT count(*) FROM tuner_jobs")[0][0] == 1


def test_database_briefly_unreachable(fleet):
    fleet.start_worker("w1")
    fleet.start_scheduler()
    job = fleet.submit(SLOW, "--shape", "N=1000", "--trials", "8", "--parallel", "2",
                       "--sampler", "grid", *FAST)
    fleet.wait(lambda: _running_trial(fleet, job)[0] > 0, 60, "a running trial")
    fleet.postgres.stop("fast")
    time.sleep(5)
    fleet.postgres.start()
    fleet.wait_finished(job, timeout_s=240)
    fleet.assert_exactly_once(job)
    for label in ("w1", "s1"):
        assert fleet.procs[label].poll() is None, fleet.log(label)[-2000:]


def test_workers_and_watch_commands(fleet):
    fleet.start_worker("w1")
    fleet.start_scheduler()
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "6",
                       "--parallel", "2", "--sampler", "grid", *FAST)
    watched = fleet.cli("watch", str(job), timeout=180)
    assert watched.returncode == 0 and f"job {job} completed" in watched.stdout
    assert "N1000" in watched.stderr and "6/6" in watched.stderr
    listing = fleet.cli("workers")
    assert "w1@fleet" in listing.stdout and "alive" in listing.stdout and "cpu" in listing.stdout
    fleet.kill("w1", signal.SIGKILL)
    fleet.wait(lambda: "silent" in fleet.cli("workers").stdout, 30, "the killed worker silent")
