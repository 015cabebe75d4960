"""``SPAWNER.popen(...)``: ``subprocess.Popen`` from one long-lived thread."""

from __future__ import annotations

import os
import subprocess
from typing import Any


class _Spawner:
    """Starts child processes from one long-lived thread. A sandboxed child dies when the
    *thread* that started it ends (``PR_SET_PDEATHSIG`` follows threads), so children started
    from a short-lived worker thread would die with it; started here, they die with this
    process. A forked child (a Celery pool process) starts afresh: the parent's thread does not
    survive the fork, and its queue still lists that thread as the waiter to wake."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        import queue
        import threading

        self._requests: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[str]:
        import queue
        import threading

        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="tuner-spawner",
                                                daemon=True)
                self._thread.start()
        answer: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(1)
        self._requests.put((args, kwargs, answer))
        proc, error = answer.get()
        if error is not None:
            raise error
        return proc  # type: ignore[no-any-return]

    def _serve(self) -> None:
        while True:
            args, kwargs, answer = self._requests.get()
            try:
                answer.put((subprocess.Popen(*args, **kwargs), None))
            except BaseException as exc:  # handed to the caller
                answer.put((None, exc))


#: ``SPAWNER.popen(...)``: ``subprocess.Popen`` from the long-lived spawner thread.
SPAWNER = _Spawner()
