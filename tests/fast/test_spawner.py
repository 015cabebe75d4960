"""The spawner thread after a fork: a Celery pool process must be able to start children."""

from __future__ import annotations

import os
import time

from tuner.core.spawner import SPAWNER


def test_a_forked_child_starts_processes_through_the_spawner():
    SPAWNER.popen(["true"]).wait()  # the parent's spawner thread is running and waiting
    pid = os.fork()
    if pid == 0:  # the child: a Popen here must not wait on the parent's dead thread
        try:
            os._exit(SPAWNER.popen(["true"]).wait())
        finally:
            os._exit(3)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child hung starting a process through the spawner")
