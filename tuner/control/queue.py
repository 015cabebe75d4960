"""The queue protocol between the driver and the workers, and the inline (local) queue.

The queue only delivers requests; results reach the driver through the database (DESIGN.md
decision 1). ``wait`` lets a driver sleep until something may have finished.

``InlineQueue`` is the embedded default: ``n`` local worker threads, each with its own worker
object (which owns its own isolated bench process), so ``n`` trials are in flight at once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Protocol

from tuner.core.types import BenchmarkRequest


class QueueUnavailable(RuntimeError):
    """The queue cannot take a request now (e.g. the broker is down); try again later."""


class BenchQueue(Protocol):
    def submit(self, request: BenchmarkRequest) -> None:
        """Deliver ``request`` to a worker; raises ``QueueUnavailable`` when it cannot."""

    def wait(self, timeout_s: float) -> None:
        """Block until a request may have finished, or ``timeout_s`` passed."""

    def epoch(self) -> str | None:
        """A token that changes when the queue lost what it held (a broker restarted empty),
        so the driver publishes its queued trials again at once; ``None``: unknown now."""

    def close(self) -> None: ...


class Worker(Protocol):
    def handle(self, request: BenchmarkRequest) -> None:
        """Claim, measure and record ``request``; never raises for a bad config."""

    def close(self) -> None: ...


class InlineQueue:
    """Runs requests on ``n`` local workers; ``make_worker`` is called once per thread."""

    def __init__(self, make_worker: Callable[[], Worker], n: int) -> None:
        if n < 1:
            raise ValueError("an inline queue needs at least one worker")
        self._requests: queue.Queue[BenchmarkRequest | None] = queue.Queue()
        self._done = threading.Condition()
        self._finished = 0
        self._errors: list[BaseException] = []
        self._workers = [make_worker() for _ in range(n)]
        self._threads = [
            threading.Thread(target=self._loop, args=(w,), name=f"inline-worker-{i}", daemon=True)
            for i, w in enumerate(self._workers)
        ]
        for t in self._threads:
            t.start()

    def _loop(self, worker: Worker) -> None:
        while True:
            request = self._requests.get()
            if request is None:
                return
            try:
                worker.handle(request)
            except BaseException as exc:  # surfaced by wait(); the thread keeps serving
                self._errors.append(exc)
            with self._done:
                self._finished += 1
                self._done.notify_all()

    def submit(self, request: BenchmarkRequest) -> None:
        self._requests.put(request)

    def epoch(self) -> str | None:
        return "inline"  # in memory: it loses nothing while the process lives

    def wait(self, timeout_s: float) -> None:
        with self._done:
            seen = self._finished
            self._done.wait_for(lambda: self._finished != seen or bool(self._errors), timeout_s)
        if self._errors:
            raise self._errors.pop(0)

    def close(self) -> None:
        # Drop what has not started, then stop every thread after its current request.
        while True:
            try:
                self._requests.get_nowait()
            except queue.Empty:
                break
        for _ in self._threads:
            self._requests.put(None)
        for w in self._workers:
            w.close()
        for t in self._threads:
            t.join(timeout=5)
