"""Looking at live processes through /proc (Linux): who is alive, whose child, what runs."""

from __future__ import annotations

import os
import time


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state first, then ppid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and int(fields[1]) == pid:
                out.append(int(entry))
    return out


def running(fragment: bytes) -> list[int]:
    """Processes whose command line contains ``fragment``."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if fragment in f.read():
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


def wait_gone(pids: list[int], timeout_s: float = 15) -> None:
    """Wait until none of ``pids`` is alive; AssertionError naming the survivors."""
    deadline = time.monotonic() + timeout_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = [p for p in pids if alive(p)]
    assert not survivors, f"processes {survivors} outlived their parent"
