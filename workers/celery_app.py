"""The Celery application of the fleet and its configuration (DESIGN.md decisions 1–3).

* JSON only, in both directions: a worker refuses a pickled message (pickle from a queue is
  remote code execution) and acknowledges it without running anything.
* Late acknowledgement, prefetch 1, ``reject_on_worker_lost``: a message is removed only after
  its task returned, a worker reserves one message at a time, and a worker killed mid-task
  puts its message back. Redelivery loops are capped in the database (the trial's attempt).
* Results go to the database, never to a Celery result backend.
* One queue per GPU kind (``bench.h100-sxm``) and a ``cpu`` queue for work that needs no GPU
  (the interpreter, replays).
* No message can stop a worker: the Redis transport drops what is not a message
  (``workers.broker``), and remote control is off unless ``TUNER_REMOTE_CONTROL=1``, so a
  ``shutdown`` or ``rate_limit`` broadcast by anyone who can write to the broker reaches
  nobody (task events stay on for Flower; ``tuner workers`` reads the database).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from celery import Celery

from tuner.core.limits import BOUNDS
from tuner.core.settings import Settings
from tuner.core.target import CPU_QUEUE
from tuner.core.types import BenchmarkRequest
from workers.broker import TRANSPORT

BENCH_TASK = "tuner.bench"
#: Seconds added to a trial's timeouts for the task's soft limit (bench process start-up and
#: calibration, database writes), and between the soft and the hard limit.
TASK_SLACK_S = 180
HARD_AFTER_SOFT_S = 60
#: Seconds a delivered, unacknowledged message stays invisible before Redis hands it out again:
#: above the hard time limit of the longest task the job bounds allow (``tuner.core.limits``),
#: so a running task is never delivered twice (a second delivery would still stop at the claim).
#: A message of a worker that died unacknowledged is not waited for: the scheduler requeues its
#: trial when the heartbeats stop, and the late copy is dropped at the claim.
VISIBILITY_TIMEOUT_S = int(BOUNDS["compile_timeout_s"].high + BOUNDS["run_timeout_s"].high
                           + TASK_SLACK_S + HARD_AFTER_SOFT_S + 3600)

app = Celery("tuner", include=["workers.tasks"])


def celery_config(settings: Settings) -> dict[str, Any]:
    return {
        "broker_url": settings.broker_url,
        "broker_transport": TRANSPORT,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "broker_transport_options": {"visibility_timeout": VISIBILITY_TIMEOUT_S},
        "visibility_timeout": VISIBILITY_TIMEOUT_S,
        "accept_content": ["json"],
        "task_serializer": "json",
        "result_serializer": "json",
        "event_serializer": "json",
        "task_ignore_result": True,
        "result_backend": None,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # The claim in the database already stops a second run of a trial, so a task that
        # outlives a broker outage may finish and record its measurement instead of being
        # cancelled and measured again.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "task_default_queue": CPU_QUEUE,
        "task_create_missing_queues": True,
        "task_publish_retry": True,
        "task_publish_retry_policy": {"max_retries": 2, "interval_start": 0.2,
                                      "interval_step": 0.5, "interval_max": 1.0},
        # Flower (the compose file's monitor) follows tasks through their events.
        "worker_send_task_events": True,
        "worker_enable_remote_control": settings.remote_control,
        "task_send_sent_event": True,
        "worker_hijack_root_logger": False,
    }


class InsecureBrokerError(ValueError):
    """A broker URL the service refuses to use; the message is meant for the user."""


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check_broker_url(url: str) -> None:
    """Refuse a Redis broker that is neither on loopback nor password-protected: anyone who
    can write to the broker can make workers run whatever its messages say."""
    parsed = urlparse(url)
    if parsed.scheme not in ("redis", "rediss"):
        raise InsecureBrokerError(f"the broker must be a redis:// or rediss:// URL, not "
                                  f"{parsed.scheme or url!r}")
    if parsed.hostname not in LOOPBACK and not parsed.password:
        raise InsecureBrokerError(f"refusing the broker at {parsed.hostname}: it is not on "
                                  "loopback and has no password (redis://:PASSWORD@host/0)")


def configure(settings: Settings) -> Celery:
    """Check and apply ``settings`` to the module's app (once per process, at the edge)."""
    check_broker_url(settings.broker_url)
    app.conf.update(celery_config(settings))
    return app


def queue_for(request: BenchmarkRequest) -> str:
    """``bench.<gpu kind>`` for GPU trials (and their confirmation), ``cpu`` for everything
    that needs no GPU: the interpreter, replays, static checks."""
    if request.mode == "check":
        return CPU_QUEUE
    return request.target.queue(request.device_kind)


def time_limits(request: BenchmarkRequest) -> tuple[float, float]:
    """(soft, hard) task time limits in seconds: backstops behind the bench process's own."""
    soft = request.compile_timeout_s + request.run_timeout_s + TASK_SLACK_S
    return soft, soft + HARD_AFTER_SOFT_S
