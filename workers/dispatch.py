"""``CeleryQueue``: the queue protocol over Celery on Redis, for the scheduler.

``submit`` publishes one task per request (JSON only; the message is the request's ``Ticket``:
the worker reads the work itself from the database), routed to the queue of the request's
device kind, with soft and hard time limits derived from the trial's timeouts. When the broker
is unreachable it raises ``QueueUnavailable``; the trial stays ``queued`` in the database and the
scheduler publishes it again later, so nothing is lost. ``wait`` sleeps until a worker announces
a finished trial on Redis, or the timeout passes.
"""

from __future__ import annotations

import contextlib
import time
import uuid

import kombu.exceptions
import redis
from celery import Celery

from tuner.control.queue import QueueUnavailable
from tuner.control.tickets import ticket_of
from tuner.core.types import BenchmarkRequest
from workers.celery_app import BENCH_TASK
from workers.celery_app import queue_for
from workers.celery_app import time_limits
from workers.tasks import DONE_CHANNEL

#: Seconds between two reads of the broker's identity (``CeleryQueue.epoch``).
EPOCH_EVERY_S = 2.0


class CeleryQueue:
    def __init__(self, app: Celery, broker_url: str) -> None:
        self.app = app
        self.broker_url = broker_url
        self._pubsub: redis.client.PubSub | None = None
        self._client: redis.Redis | None = None
        self._epoch: str | None = None
        self._epoch_read = -EPOCH_EVERY_S

    def submit(self, request: BenchmarkRequest) -> None:
        soft, hard = time_limits(request)
        try:
            self.app.send_task(
                BENCH_TASK, args=[ticket_of(request).to_json()], queue=queue_for(request),
                soft_time_limit=soft, time_limit=hard,
                task_id=f"trial-{request.trial_id}-a{request.attempt}-{uuid.uuid4().hex[:8]}")
        except (kombu.exceptions.OperationalError, redis.RedisError, OSError) as exc:
            raise QueueUnavailable(f"broker unreachable: {exc}") from exc

    def epoch(self) -> str | None:
        """The broker's ``run_id`` (new at every Redis start: a restarted Redis without
        persistence holds none of the messages published before), read at most every
        ``EPOCH_EVERY_S``; ``None`` while the broker is unreachable."""
        now = time.monotonic()
        if now - self._epoch_read < EPOCH_EVERY_S:
            return self._epoch
        self._epoch_read = now
        try:
            if self._client is None:
                self._client = redis.Redis.from_url(self.broker_url, socket_timeout=2,
                                                    socket_connect_timeout=1)
            self._epoch = str(self._client.info("server").get("run_id"))
        except (redis.RedisError, OSError):
            self._client = None
            self._epoch = None
        return self._epoch

    def wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        try:
            if self._pubsub is None:
                client = redis.Redis.from_url(self.broker_url, socket_timeout=timeout_s + 1,
                                              socket_connect_timeout=1)
                self._pubsub = client.pubsub(ignore_subscribe_messages=True)
                self._pubsub.subscribe(DONE_CHANNEL)
            message = self._pubsub.get_message(timeout=timeout_s)
            while message is not None:  # drain: one wake-up is enough
                message = self._pubsub.get_message(timeout=0)
        except (redis.RedisError, OSError):
            self._pubsub = None
            remaining = deadline - time.monotonic()
            if remaining > 0:
                time.sleep(remaining)

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(redis.RedisError, OSError):
                self._client.close()
            self._client = None
        if self._pubsub is not None:
            with contextlib.suppress(redis.RedisError, OSError):
                self._pubsub.close()
            self._pubsub = None
