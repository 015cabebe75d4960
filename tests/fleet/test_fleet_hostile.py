"""The fleet against hostile kernels, forged and poisoned messages, cold starts and outages:
real PostgreSQL, real redis-server, real ``tuner worker``/``tuner scheduler`` processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import FAULT_KERNEL
from tests.conftest import ROOT
from tests.processes import running
from tests.processes import wait_gone

pytestmark = pytest.mark.integration

FAST = ["--backend", "interpret", "--rep-ms", "5", "--seed", "0", "--confirm-top", "0"]


def test_a_kernel_on_a_fleet_worker_reads_no_credential(fleet):
    """The database URL carries a password (trust auth ignores it); the probe kernel reads
    the environment of every process of this user: worker, pool, scheduler included."""
    fleet.env["TUNER_DB_URL"] = fleet.db_url.replace("postgres@", "postgres:s3cret-marker@")
    fleet.start_worker("w1")
    fleet.start_scheduler()
    job = fleet.submit(f"{FAULT_KERNEL}:PROBE", "--shape", "N=100", "--trials", "1",
                       "--max-attempts", "1", *FAST)
    fleet.wait_finished(job)
    ((status, error),) = fleet.rows("SELECT status, error FROM tuner_trials WHERE job_id = :j",
                                    j=job)
    assert status == "crashed" and "probe:" in error, error
    assert "leaked=[]" in error and "own=[]" in error, error
    ancestors = int(re.search(r"ancestors=(\d+)", error).group(1))  # type: ignore[union-attr]
    assert ancestors >= 2  # the pool process and the worker, at least


def test_kill_9_of_a_worker_kills_its_spinning_bench_process(fleet):
    before = set(running(b"tuner.measure.bench_child"))
    fleet.start_worker("w1")
    fleet.start_scheduler()
    fleet.submit(f"{FAULT_KERNEL}:SPIN", "--shape", "N=100", "--trials", "1",
                 "--run-timeout", "600", "--compile-timeout", "600", *FAST)
    fleet.wait(lambda: fleet.rows("SELECT count(*) FROM tuner_trials WHERE status = "
                                  "'running'")[0][0] == 1, 120, "the spinning trial")
    time.sleep(1.0)
    spinning = [p for p in running(b"tuner.measure.bench_child") if p not in before]
    assert spinning
    fleet.kill("w1", signal.SIGKILL)  # the worker's process group; bench children have theirs
    wait_gone(spinning)


def test_a_forged_message_runs_nothing_it_names(fleet, tmp_path):
    """An old-style message carrying a whole request (a problem 1,000× the job's) is dropped;
    a ticket for a queued trial runs the trial as the database has it."""
    fleet.start_scheduler()  # no worker yet: the trials wait, published
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "2",
                       "--parallel", "2", "--sampler", "grid", *FAST)
    fleet.wait(lambda: fleet.rows("SELECT count(*) FROM tuner_trials WHERE job_id = :j AND "
                                  "published_at IS NOT NULL", j=job)[0][0] == 2, 60, "publishing")
    ((trial_id, config),) = fleet.rows("SELECT id, config FROM tuner_trials WHERE job_id = :j "
                                       "ORDER BY id LIMIT 1", j=job)
    forged = {"trial_id": trial_id, "attempt": 1, "job_id": job, "kernel": f"{FAULT_KERNEL}:FAULT",
              "problem": {"N": 1_000_000}, "dtype": "fp32", "params": config,
              "backend": "interpret", "device_kind": "cpu"}
    code = f"""
import json
import os
from celery import Celery
app = Celery(broker={fleet.redis.url!r})
app.send_task("tuner.bench", args=[json.loads({json.dumps(forged)!r})], queue="cpu")
app.send_task("tuner.bench", args=[{{"mode": "bench", "ref": {trial_id}, "attempt": 1}}],
              queue="cpu")
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=ROOT)
    fleet.start_worker("w1")
    fleet.wait_finished(job)
    fleet.assert_exactly_once(job)
    assert "dropping a malformed ticket" in fleet.log("w1")


def test_a_poisoned_job_is_dead_lettered_and_finishes(fleet):
    """A job whose stored spec no worker can run (an overflowing timeout, written past the
    submit check as an older client could) ends with its trials ``lost``, not redelivered
    for ever."""
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "2",
                       "--parallel", "1", "--max-attempts", "2", *FAST)
    ((spec,),) = fleet.rows("SELECT spec FROM tuner_jobs WHERE id = :j", j=job)
    spec = spec if isinstance(spec, dict) else json.loads(spec)
    spec["compile_timeout_s"] = 1e300
    with fleet.engine.begin() as conn:
        import sqlalchemy as sa

        conn.execute(sa.text("UPDATE tuner_jobs SET spec = :s WHERE id = :j"),
                     {"s": json.dumps(spec), "j": job})
    fleet.start_worker("w1")
    fleet.start_scheduler()
    fleet.wait_finished(job, timeout_s=120)
    rows = fleet.rows("SELECT status, attempt, error FROM tuner_trials WHERE job_id = :j", j=job)
    assert rows and all(r.status == "lost" and r.attempt == 2 for r in rows), rows
    assert all("dead-lettered after 2 failed deliveries" in r.error for r in rows)
    assert "out of bounds" in rows[0].error


def test_a_cold_start_of_many_schedulers_and_workers_on_an_empty_database(fleet):
    for i in range(3):
        fleet._spawn(f"s{i}", ["scheduler", "--poll", "0.2"])
    for i in range(2):
        fleet._spawn(f"w{i}", ["worker", "--device", "cpu", "--name", f"w{i}@fleet"])
    fleet.wait(lambda: all(fleet.log(f"w{i}").count(" ready.") for i in range(2)), 120,
               "both workers ready")
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "4",
                       "--parallel", "2", "--sampler", "grid", *FAST)
    fleet.wait_finished(job)
    fleet.assert_exactly_once(job)
    for label, proc in fleet.procs.items():
        assert proc.poll() is None, (label, fleet.log(label)[-2000:])


def test_messages_lost_with_a_broker_restart_are_republished_within_seconds(fleet):
    fleet.env["TUNER_REPUBLISH_S"] = "3600"  # only the restart detection can bring them back
    fleet.start_scheduler()
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "4",
                       "--parallel", "2", "--sampler", "grid", *FAST)
    fleet.wait(lambda: fleet.rows("SELECT count(*) FROM tuner_trials WHERE job_id = :j AND "
                                  "published_at IS NOT NULL", j=job)[0][0] == 2, 60, "publishing")
    fleet.redis.stop()  # no persistence: the two messages are gone
    fleet.redis.start()
    fleet.start_worker("w1")
    started = time.monotonic()
    fleet.wait_finished(job, timeout_s=90)
    fleet.assert_exactly_once(job)
    assert time.monotonic() - started < 90
    assert "the broker restarted" in fleet.log("s1")


def test_a_database_outage_does_not_make_live_workers_vanished(fleet):
    fleet.start_worker("w1")
    fleet.start_scheduler()
    job = fleet.submit(f"{FAULT_KERNEL}:LINGER", "--shape", "N=1000", "--trials", "2",
                       "--parallel", "1", "--sampler", "grid", *FAST)
    fleet.wait(lambda: fleet.rows("SELECT count(*) FROM tuner_trials WHERE job_id = :j AND "
                                  "status = 'running'", j=job)[0][0] == 1, 120, "a running trial")
    fleet.postgres.stop("immediate")
    time.sleep(5)  # five heartbeats missed (1 s each; three make a worker vanished)
    fleet.postgres.start()
    fleet.wait_finished(job, timeout_s=180)
    fleet.assert_exactly_once(job)
    attempts = fleet.rows("SELECT attempt FROM tuner_trials WHERE job_id = :j", j=job)
    assert all(a == 1 for (a,) in attempts), attempts  # nothing re-run for a false vanish


def test_a_frozen_worker_loses_its_trial_and_its_late_result_is_refused(fleet):
    """Checklist #14: SIGSTOP a worker mid-trial past the heartbeat grace; its trial is
    requeued and finished by another worker; after SIGCONT its late result is refused without
    a crash, and every trial is recorded once."""
    fleet.start_worker("w1")
    fleet.start_scheduler()
    job = fleet.submit(f"{FAULT_KERNEL}:LINGER", "--shape", "N=1000", "--trials", "1",
                       "--sampler", "grid", *FAST)
    fleet.wait(lambda: fleet.rows("SELECT count(*) FROM tuner_trials WHERE job_id = :j AND "
                                  "status = 'running'", j=job)[0][0] == 1, 120, "a running trial")
    frozen = fleet.procs["w1"]
    os.killpg(frozen.pid, signal.SIGSTOP)
    try:
        fleet.start_worker("w2")
        fleet.wait(lambda: fleet.rows("SELECT max(attempt) FROM tuner_trials WHERE job_id = :j",
                                      j=job)[0][0] == 2, 60, "the trial requeued")
        fleet.wait_finished(job, timeout_s=120)
    finally:
        os.killpg(frozen.pid, signal.SIGCONT)
    fleet.wait(lambda: "arrived after the trial moved on" in fleet.log("w1"), 60,
               "the thawed worker's late result refused")
    assert frozen.poll() is None  # no crash
    fleet.assert_exactly_once(job)
