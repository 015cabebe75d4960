"""The fleet against what anyone with write access to the broker can send: raw garbage on a
queue, foreign messages, and Celery's remote-control broadcasts. No message stops a worker, and
a worker that does stop says so with a non-zero exit status."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time

import pytest
from kombu.connection import Connection
from kombu.entity import Exchange
from kombu.entity import Queue
from kombu.message import Message

from tests.conftest import FAULT_KERNEL
from tests.conftest import ROOT
from workers.broker import TRANSPORT

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


def test_an_acknowledgement_redis_refused_still_frees_the_prefetch_window(redis_server):
    """A trial that finishes while Redis is down cannot acknowledge its message. With prefetch
    1, kombu's channel kept that message as outstanding and never asked for another, so the
    worker stopped consuming for good; the fleet's transport lets it go (``workers.broker``)."""
    queue = Queue("cpu", Exchange("cpu", type="direct"), routing_key="cpu")
    received: list[Message] = []

    def publish(body: dict[str, int]) -> None:
        with Connection(redis_server.url, transport=TRANSPORT) as producer_connection:
            producer_connection.Producer().publish(body, exchange=queue.exchange,
                                                   routing_key="cpu", declare=[queue])

    publish({"n": 0})
    keep = [lambda _body, message: received.append(message)]
    with Connection(redis_server.url, transport=TRANSPORT) as connection, \
            connection.Consumer(queue, callbacks=keep) as consumer:
        consumer.qos(prefetch_count=1)
        connection.drain_events(timeout=30)
        redis_server.stop()  # every message is lost, the delivered one included
        with pytest.raises(connection.connection_errors):
            received[0].ack()
        redis_server.start()
        publish({"n": 1})
        deadline = time.monotonic() + 30
        while len(received) < 2 and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError, *connection.connection_errors):
                connection.drain_events(timeout=1)  # the first read finds the old socket closed
    assert [m.payload for m in received] == [{"n": 0}, {"n": 1}]
