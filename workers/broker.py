"""The Redis transport of the fleet: kombu's, except that no message can stop a worker.

Anyone who can write to the broker can push anything onto a queue. kombu's Redis channel
decodes what ``BRPOP`` returns inside its event loop, so one list element that is not a kombu
message (raw bytes, JSON of another shape) raised out of the loop and ended the worker. This
channel drops such an element with a warning and goes on; connection errors still propagate
(the consumer reconnects), and messages that decode are handled exactly as kombu does (a
pickled one is then refused by Celery's ``accept_content``).

An acknowledgement that cannot reach Redis still gives the channel its credit back. kombu
forgets a delivered message only after Redis confirmed the acknowledgement, and a channel with
prefetch 1 that holds one unforgotten message never asks for another: a worker whose trial
finished while Redis was down (its acknowledgement refused) stopped consuming for good, with
nothing outstanding on the broker that could tell it Redis was back. Here the message is
forgotten locally and the error still propagates (Celery logs it); the copy Redis may keep in
its unacknowledged set comes back after the visibility timeout and stops at the trial's claim.

``TRANSPORT`` is what ``workers.celery_app`` sets as Celery's ``broker_transport``; the URL's
scheme (``redis`` or ``rediss``) still decides the TLS settings.
"""

from __future__ import annotations

import logging
from queue import Empty
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

log = logging.getLogger(__name__)

TRANSPORT = "workers.broker:Transport"


class QoS(kombu_redis.QoS):  # type: ignore[misc]
    """kombu's Redis QoS; a message whose acknowledgement or rejection failed on a connection
    error is still released from the channel's prefetch window (then the error propagates)."""

    def ack(self, delivery_tag: str) -> None:
        try:
            super().ack(delivery_tag)  # type: ignore[no-untyped-call]
        except self.channel.connection_errors:
            virtual.QoS.ack(self, delivery_tag)
            raise

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        try:
            super().reject(delivery_tag, requeue=requeue)  # type: ignore[no-untyped-call]
        except self.channel.connection_errors:
            virtual.QoS.ack(self, delivery_tag)
            raise


class Channel(kombu_redis.Channel):
    """kombu's Redis channel; a popped element that is not a deliverable message is dropped,
    and a failed acknowledgement does not hold the prefetch window (``QoS``)."""

    QoS = QoS

    def _brpop_read(self, **options: Any) -> bool:
        try:
            return bool(super()._brpop_read(**options))  # type: ignore[no-untyped-call]
        except Empty:
            raise
        except self.connection_errors:
            raise
        except Exception as exc:  # the element is already off its list: nothing to restore
            log.warning("dropping a malformed broker message: %s: %s", type(exc).__name__,
                        str(exc)[:200])
            return True


class Transport(kombu_redis.Transport):  # type: ignore[misc]
    Channel = Channel
