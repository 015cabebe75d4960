"""A load run under every fault at once: three jobs of 12 trials each on a fleet whose workers
are killed (SIGKILL), stopped (SIGTERM), and whose Redis and PostgreSQL go away mid-run. Every
trial ends recorded exactly once; the stopped worker exits 0 (it was asked to stop)."""

from __future__ import annotations

import signal
import time

import pytest

from tests.conftest import FAULT_KERNEL
from tests.fleet.fleet import Fleet

pytestmark = pytest.mark.integration

PROBLEMS = ["--shape", "N=1000", "--shape", "N=2000", "--shape", "N=3000", "--shape", "N=4000"]
JOB = [*PROBLEMS, "--trials", "3", "--parallel", "2", "--sampler", "grid", "--backend",
       "interpret", "--rep-ms", "5", "--seed", "0", "--confirm-top", "0"]


def _measured(fleet: Fleet, jobs: list[int]) -> int:
    return int(fleet.rows("SELECT count(*) FROM tuner_trials WHERE job_id = ANY(:j) AND "
                          "status = 'ok'", j=jobs)[0][0])


def _after(fleet: Fleet, jobs: list[int], count: int) -> None:
    fleet.wait(lambda: _measured(fleet, jobs) >= count, 240, f"{count} measured trials")


def test_three_jobs_of_twelve_trials_survive_four_faults(fleet):
    fleet.start_worker("w1")
    fleet.start_worker("w2")
    fleet.start_scheduler()
    jobs = [fleet.submit(f"{FAULT_KERNEL}:LOAD", *JOB) for _ in range(3)]

    _after(fleet, jobs, 3)
    fleet.kill("w1")  # the whole worker, mid-run
    fleet.start_worker("w3")

    _after(fleet, jobs, 11)
    stopped = fleet.procs["w2"]
    fleet.kill("w2", signal.SIGTERM)  # a warm shutdown: its trial finishes first
    assert stopped.returncode == 0, fleet.log("w2")[-3000:]
    fleet.start_worker("w4")

    _after(fleet, jobs, 18)
    fleet.redis.stop()  # every queued message is lost
    time.sleep(2)  # the outage
    fleet.redis.start()

    _after(fleet, jobs, 26)
    fleet.postgres.stop("fast")
    time.sleep(3)  # the outage
    fleet.postgres.start()

    for job in jobs:
        fleet.wait_finished(job, timeout_s=300)
        fleet.assert_exactly_once(job)
    assert _measured(fleet, jobs) == 36
    for label in ("w3", "w4", "s1"):
        assert fleet.procs[label].poll() is None, fleet.log(label)[-3000:]
