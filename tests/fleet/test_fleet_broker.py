"""The fleet against what anyone with write access to the broker can send: raw garbage on a
queue, foreign messages, and Celery's remote-control broadcasts. No message stops a worker, and
a worker that does stop says so with a non-zero exit status."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import FAULT_KERNEL
from tests.conftest import ROOT

pytestmark = pytest.mark.integration
FAST = ["--backend", "interpret", "--rep-ms", "5", "--seed", "0", "--confirm-top", "0"]


def _redis(fleet, *args: str) -> None:  # type: ignore[no-untyped-def]
    code = ("import redis, sys; r = redis.Redis.from_url(sys.argv[1]); "
            "r.execute_command(*sys.argv[2:])")
    subprocess.run([sys.executable, "-c", code, fleet.redis.url, *args], check=True,
                   timeout=30, cwd=ROOT)


def _broadcast(fleet, command: str, **arguments: object) -> None:  # type: ignore[no-untyped-def]
    code = f"""
from celery import Celery
app = Celery(broker={fleet.redis.url!r})
app.control.broadcast({command!r}, arguments={arguments!r})
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=ROOT)


def test_garbage_and_foreign_messages_never_stop_a_worker(fleet):
    fleet.start_worker("w1")
    proc = fleet.procs["w1"]
    for raw in ("0123456789", "{not json", '{"body": "x", "headers": {}}', "[1, 2, 3]"):
        _redis(fleet, "LPUSH", "cpu", raw)
    time.sleep(3)  # what a worker does with each: drop it (a poll gains nothing here)
    assert proc.poll() is None, fleet.log("w1")[-3000:]
    fleet.start_scheduler()
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "2",
                       "--sampler", "grid", *FAST)
    fleet.wait_finished(job)
    fleet.assert_exactly_once(job)


def test_remote_control_cannot_stop_or_throttle_a_worker(fleet):
    fleet.start_worker("w1")
    proc = fleet.procs["w1"]
    _broadcast(fleet, "rate_limit", task_name="tuner.bench", rate_limit="1/h")
    _broadcast(fleet, "shutdown")
    time.sleep(3)
    assert proc.poll() is None, fleet.log("w1")[-3000:]
    fleet.start_scheduler()
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "2",
                       "--sampler", "grid", "--parallel", "2", *FAST)
    fleet.wait_finished(job, timeout_s=90)  # 1/h would have held the second trial an hour
    fleet.assert_exactly_once(job)


def test_an_asked_stop_exits_zero_and_a_lost_broker_state_stops_nothing(fleet):
    """A supervisor restarts a worker that fails: an orderly stop must not look like one, and
    a broker that loses its data must not end a worker (``workers.service.exit_status`` gives
    an unexpected stop status 3)."""
    fleet.start_worker("w1")
    proc = fleet.procs["w1"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    fleet.procs.pop("w1")
    fleet.start_worker("w2")
    _redis(fleet, "FLUSHALL")
    time.sleep(2)  # the worker's next poll of the emptied broker
    assert fleet.procs["w2"].poll() is None, fleet.log("w2")[-3000:]
    fleet.start_scheduler()
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "2",
                       "--sampler", "grid", *FAST)
    fleet.wait_finished(job)
    fleet.assert_exactly_once(job)
