"""Host-wide sandbox user ids: leasing one (a lock file per id), killing every process of an id,
deleting what it left in the world-writable scratch folders, and reaping the orphans of ids
nobody holds. Linux ``/proc`` only (``tuner.core.isolation`` uses it when it runs as root).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import IO

#: World-writable folders a sandbox user may leave files in (cleaned at ``release``).
SCRATCH = (Path("/dev/shm"), Path("/tmp"), Path("/var/tmp"))


def lease_uid(lock_dir: Path, uids: tuple[int, int]) -> tuple[int, IO[bytes]]:
    """A user id of ``uids`` (first, how many) no other live sandbox on this host holds (a
    lock file per id under ``lock_dir``); what a previous holder left behind is killed and
    deleted first, and so is every orphan of an id nobody holds (``reap_orphans``)."""
    lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    reap_orphans(lock_dir, uids)
    first, count = uids
    start = random.randrange(count)
    for i in range(count):
        uid = first + (start + i) % count
        handle = open(lock_dir / f"{uid}.lock", "wb")  # noqa: SIM115 (held while leased)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        kill_user(uid, uid)
        remove_files_of(uid)
        return uid, handle
    raise RuntimeError(f"all {count} sandbox user ids are in use (TUNER_SANDBOX_UIDS)")


def kill_user(uid: int, gid: int) -> None:
    """SIGKILL every process of ``uid``: a helper running as that user kills everything it
    may signal (``kill(-1)``), which is atomic against forks."""
    if not any(u == uid for _, u, _ in processes()):
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run([sys.executable, "-S", "-c",
                        "import os, signal; os.kill(-1, signal.SIGKILL)"],
                       user=uid, group=gid, extra_groups=[], env={}, timeout=30,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)


def remove_files_of(uid: int) -> None:
    """Delete what user ``uid`` left at the top of the world-writable scratch folders."""
    for folder in SCRATCH:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


def processes() -> list[tuple[int, int, int]]:
    """(pid, real uid, parent pid) of every process (Linux ``/proc``)."""
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if ":" in line)
                found.append((int(name), int(fields["Uid"].split()[0]),
                              int(fields["PPid"].strip())))
            except (OSError, KeyError, ValueError):
                continue
    return found


def reap_orphans(lock_dir: Path, uids: tuple[int, int]) -> list[int]:
    """Kill the processes of every sandbox user id in ``uids`` that no live sandbox holds, and
    delete their scratch files; returns those ids. A process a sandbox user double-forked
    outlives its sandbox when the service holding the lease was SIGKILLed (nothing could kill
    it then): it goes at the next lease on this host, not only when its id is leased again."""
    first, count = uids
    orphaned = sorted({uid for _, uid, _ in processes() if first <= uid < first + count})
    reaped = []
    for uid in orphaned:
        with open(lock_dir / f"{uid}.lock", "wb") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live sandbox holds it: its processes are its own
            kill_user(uid, uid)
            remove_files_of(uid)
            reaped.append(uid)
    return reaped


def rss(pid: int) -> int:
    """Resident memory of ``pid`` (bytes; 0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0
