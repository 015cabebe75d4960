"""Where a user's kernel code runs: a process of its own user, with no network, whose whole
process tree dies with it (README, "Security"; the environment side is ``tuner.core.sandbox``).

Every process that runs user code (bench, compile and describe processes) is started with a
``Sandbox``: the parent picks its identity and folders, the child enters it first thing
(``enter_sandbox``, before any user code).

**Isolated** (the parent is root, ``TUNER_SANDBOX`` is ``auto``): each process gets a user id
of its own, leased host-wide from ``TUNER_SANDBOX_UIDS`` (default 200000–249999; a lock file
per id under ``TUNER_SANDBOX_LOCK_DIR``), and the group of its *tenant* — the job it serves
(``job-17``) or the local run (``run-…``) — from ``TUNER_SANDBOX_GIDS``. The tenant's folder
(``<cache dir>/sandbox/<tenant>``: Triton cache, home, temporary files) belongs to that group
(mode 2770), so the processes of one job share compiled binaries and nobody else can write
them. The child enters a new network namespace (no interface but a down loopback: it reaches no
server), drops to that user and group (no capability left), and sets umask 007. It can read
no credential (every service process runs as another user; their ``/proc/<pid>/environ`` is
0400), write no database file, service code or other tenant's cache. Because the user id is
its own, "every process of that user" *is* its process tree, however it forked: ``kill_all``
kills them all at once (``kill(-1)`` as that user), ``resident_bytes`` caps their memory
together, and ``release`` also deletes what it left in ``/dev/shm``, ``/tmp`` and ``/var/tmp``.
Should the service itself be SIGKILLed, nothing releases its sandboxes: every later lease on
the host first kills the processes (and scratch files) of ids no live sandbox holds
(``tuner.core.sandbox_ids``).

**Same user** (not root, or ``TUNER_SANDBOX=off``): the child tries an unprivileged user and
network namespace (same uid, no network) and makes itself a child subreaper, so descendants that
double-fork stay in its tree while it lives; ``kill_all`` kills that tree. What is lost (README):
the credentials and files of the service's user are within reach, and a descendant orphaned by
a crash of its process escapes the tree.

Linux only; elsewhere a sandbox is only the tenant folder.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import IO
from typing import Any

from tuner.core.sandbox_ids import kill_user
from tuner.core.sandbox_ids import lease_uid
from tuner.core.sandbox_ids import processes
from tuner.core.sandbox_ids import remove_files_of
from tuner.core.sandbox_ids import rss
from tuner.core.spawner import SPAWNER

log = logging.getLogger(__name__)
UID_VAR, GID_VAR, NETNS_VAR = "TUNER_SANDBOX_UID", "TUNER_SANDBOX_GID", "TUNER_SANDBOX_NETNS"
DEFAULT_UIDS = (200_000, 50_000)  # first id, how many
DEFAULT_GIDS = (200_000, 50_000)
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
PR_SET_CHILD_SUBREAPER = 36


def _range(value: str | None, default: tuple[int, int]) -> tuple[int, int]:
    """``"200000-249999"`` → (200000, 50000); the default when unset or malformed."""
    try:
        first, last = (int(p) for p in str(value).split("-", 1))
    except ValueError:
        return default
    return (first, last - first + 1) if 0 < first <= last else default


class SandboxUnavailable(RuntimeError):
    """An isolated sandbox cannot be made here, and ``TUNER_SANDBOX=require`` was asked."""


@dataclass(frozen=True)
class SandboxPolicy:
    """How sandboxes are made on this host (read once from the environment). ``why_not``:
    why processes are not isolated (None when they are)."""

    isolate: bool  # own users and a network namespace
    why_not: str | None = None
    required: bool = False  # TUNER_SANDBOX=require: refuse to run kernels otherwise
    off: bool = False  # TUNER_SANDBOX=off: no namespace either (debugging)
    uids: tuple[int, int] = DEFAULT_UIDS
    gids: tuple[int, int] = DEFAULT_GIDS
    lock_dir: Path = Path(tempfile.gettempdir()) / "tuner-sandbox-ids"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SandboxPolicy:
        env = os.environ if env is None else env
        mode = env.get("TUNER_SANDBOX", "auto").strip().lower()
        why_not = None
        if not sys.platform.startswith("linux"):
            why_not = "not Linux"
        elif mode == "off":
            why_not = "TUNER_SANDBOX=off"
        elif os.geteuid() != 0:
            why_not = "the worker is not root (it cannot start processes as other users)"
        else:
            blocked = unreadable_by_others(service_paths())
            if blocked:
                why_not = (f"{blocked} is not readable by other users, so a sandbox user "
                           "could not run Python from this installation")
        lock_dir = Path(env.get("TUNER_SANDBOX_LOCK_DIR")
                        or Path(tempfile.gettempdir()) / "tuner-sandbox-ids")
        if why_not is not None and mode == "require":
            raise SandboxUnavailable(f"TUNER_SANDBOX=require, but {why_not}")
        return cls(isolate=why_not is None, why_not=why_not, required=mode == "require",
                   off=mode == "off",
                   uids=_range(env.get("TUNER_SANDBOX_UIDS"), DEFAULT_UIDS),
                   gids=_range(env.get("TUNER_SANDBOX_GIDS"), DEFAULT_GIDS), lock_dir=lock_dir)

    def gid_of(self, tenant: str) -> int:
        digest = int.from_bytes(hashlib.sha256(tenant.encode()).digest()[:8], "big")
        return self.gids[0] + digest % self.gids[1]


def sandbox_mode(policy: SandboxPolicy | None = None) -> str:
    """One line for logs: how kernel code runs on this host, and why not isolated."""
    policy = policy or SandboxPolicy.from_env()
    if policy.isolate:
        return "kernel code runs as sandbox users of its own, with no network"
    return f"kernel code runs as this user (same-user mode: {policy.why_not})"


def service_paths() -> list[Path]:
    """What a sandboxed Python must read: the interpreter, its standard library and the
    folders this process imports from."""
    import sysconfig

    paths = [Path(sys.executable).resolve(), Path(sysconfig.get_paths()["stdlib"])]
    paths += [Path(p) for p in sys.path if p and Path(p).is_dir()]
    return paths


def untraversable(folder: Path) -> Path | None:
    """The first of ``folder`` and the folders above it that other users cannot pass."""
    folder = folder.resolve()
    for step in (*reversed(folder.parents), folder):
        if os.stat(step).st_mode & 0o001 == 0:
            return step
    return None


def unreadable_by_others(paths: list[Path]) -> Path | None:
    """The first path (or folder on its way) that other users cannot read, or None."""
    for path in paths:
        path = path.resolve()
        for folder in reversed(path.parents):
            if os.stat(folder).st_mode & 0o001 == 0:
                return folder
        mode = os.stat(path).st_mode
        need = 0o005 if path.is_dir() else 0o004
        if mode & need != need:
            return path
    return None


def tenant_dir(cache_dir: Path | None, tenant: str) -> Path:
    """The tenant's folder: Triton cache, home and temporary files of its processes."""
    base = cache_dir if cache_dir is not None else Path(tempfile.gettempdir()) / "tuner-cache"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in tenant)[:100]
    return base / "sandbox" / safe


@dataclass
class Sandbox:
    """One sandboxed process's identity and folders; ``release`` when the process is done."""

    tenant: str
    folder: Path
    uid: int | None = None  # None: the parent's own user
    gid: int | None = None
    _lock: IO[bytes] | None = field(default=None, repr=False)
    root_pid: int | None = None  # the process started in it (same-user mode)
    no_network: bool = True  # a network namespace of its own (best effort as the same user)

    @property
    def isolated(self) -> bool:
        return self.uid is not None

    def environment(self) -> dict[str, str]:
        """What the child needs to enter the sandbox and where it may write."""
        env = {NETNS_VAR: "1" if self.no_network else "0", "HOME": str(self.folder / "home"),
               "TMPDIR": str(self.folder / "tmp"), "TRITON_CACHE_DIR": str(self.folder / "triton")}
        if self.uid is not None and self.gid is not None:
            env.update({UID_VAR: str(self.uid), GID_VAR: str(self.gid)})
        return env

    def pids(self) -> list[int]:
        """Every live process of the sandbox: its user's, or the started process's tree."""
        if self.uid is not None:
            return [pid for pid, uid, _ in processes() if uid == self.uid]
        if self.root_pid is None:
            return []
        children: dict[int, list[int]] = {}
        for pid, _, ppid in processes():
            children.setdefault(ppid, []).append(pid)
        tree, todo = [], [self.root_pid]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, []))
        return tree

    def resident_bytes(self) -> int:
        """Resident memory of every process of the sandbox together (bytes)."""
        return sum(rss(pid) for pid in self.pids())

    def kill_all(self) -> None:
        """SIGKILL every process of the sandbox, however it forked."""
        if self.uid is not None and self.gid is not None:
            kill_user(self.uid, self.gid)
            return
        self._kill_tree(keep_root=False)

    def kill_descendants(self) -> None:
        """Same-user mode: SIGKILL what the started process started, while it still lives.
        Its descendants are in its tree only as long as it (their subreaper) lives: one that
        is still forking when it exits escapes to init. (Isolated: nothing to do before
        ``release``, which kills every process of the user.)"""
        if self.uid is None:
            self._kill_tree(keep_root=True)

    def _kill_tree(self, keep_root: bool) -> None:
        for _ in range(3):  # processes forked while we kill are caught by the next round
            pids = [p for p in self.pids() if not (keep_root and p == self.root_pid)]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def release(self) -> None:
        """Kill what is left, delete its scratch files, give the user id back."""
        self.kill_all()
        if self.uid is not None:
            remove_files_of(self.uid)
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def open_sandbox(tenant: str, cache_dir: Path | None,
                 policy: SandboxPolicy | None = None) -> Sandbox:
    """A sandbox for one process of ``tenant`` (its folder made, a user id leased)."""
    policy = policy or SandboxPolicy.from_env()
    folder = tenant_dir(cache_dir, tenant)
    if not policy.isolate:
        for sub in ("triton", "home", "tmp"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        return Sandbox(tenant, folder, no_network=not policy.off)
    folder.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(folder.parent, 0o711)  # ``sandbox/``: passable, not listable
    prune_tenants(folder.parent)
    blocked = untraversable(folder.parent)
    if blocked is not None:  # the tenant folder would be out of its users' reach
        why = (f"{blocked} is not searchable by other users, so sandboxed processes could not "
               "reach their folder (TUNER_CACHE_DIR)")
        if policy.required:
            raise SandboxUnavailable(why)
        _warn_once(f"kernels run as this user, not in their own: {why}")
        return open_sandbox(tenant, cache_dir, dataclasses.replace(policy, isolate=False,
                                                                   why_not=why))
    gid = policy.gid_of(tenant)
    for path in (folder, folder / "triton", folder / "home", folder / "tmp"):
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, 0, gid)
        os.chmod(path, 0o2770)
    uid, lock = lease_uid(policy.lock_dir, policy.uids)
    return Sandbox(tenant, folder, uid, gid, lock)


_WARNED: set[str] = set()
#: Tenant folders untouched this long are deleted (a job's Triton cache, home, scratch).
TENANT_MAX_AGE_S = 3 * 24 * 3600.0
_PRUNED: dict[Path, float] = {}


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning(message)


def prune_tenants(sandboxes: Path, max_age_s: float = TENANT_MAX_AGE_S) -> None:
    """Delete tenant folders under ``sandboxes`` unused for ``max_age_s`` (once an hour)."""
    now = time.time()
    if now - _PRUNED.get(sandboxes, 0.0) < 3600:
        return
    _PRUNED[sandboxes] = now
    with contextlib.suppress(OSError):
        for entry in os.scandir(sandboxes):
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False) and \
                        now - entry.stat().st_mtime > max_age_s:
                    shutil.rmtree(entry.path, ignore_errors=True)


def remove_tenant(cache_dir: Path | None, tenant: str) -> None:
    """Delete a finished tenant's folder (a local run's, once it is over)."""
    shutil.rmtree(tenant_dir(cache_dir, tenant), ignore_errors=True)


# -- in the child ---------------------------------------------------------------------------
def enter_sandbox(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """In a child, before any user code: become a subreaper, leave the network, become the
    sandbox's user and group. Returns what took effect (``user``: ``own``/``same``;
    ``network``: ``none``/``host``); raises when an isolated sandbox cannot be entered."""
    env = os.environ if env is None else env
    libc = _libc()
    if libc is None:
        return {"user": "same", "network": "host"}
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    network = "host"
    uid, gid = env.get(UID_VAR, ""), env.get(GID_VAR, "")
    if env.get(NETNS_VAR) == "1":
        network = "none" if _leave_network(libc, as_root=os.geteuid() == 0) else "host"
    if uid.isdigit() and gid.isdigit():
        if network != "none":
            raise OSError("the sandbox's network namespace could not be created")
        os.setgroups([])
        os.setresgid(int(gid), int(gid), int(gid))
        os.setresuid(int(uid), int(uid), int(uid))
    os.umask(0o007)
    return {"user": "own" if uid.isdigit() else "same", "network": network}


def _leave_network(libc: ctypes.CDLL, as_root: bool) -> bool:
    """A new network namespace (as root), else a user namespace with one (same ids inside)."""
    if as_root:
        return bool(libc.unshare(CLONE_NEWNET) == 0)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return False
    try:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError:
        pass  # unmapped ids still reach files as "others"; the network is gone either way
    return True


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


# -- a one-shot child ------------------------------------------------------------------------
@dataclass(frozen=True)
class Finished:
    """What a one-shot sandboxed child left: exit code, output, and why it was stopped."""

    returncode: int
    stdout: str
    stderr: str
    stopped: str | None = None  # "timeout" or "memory"


def run_sandboxed(cmd: list[str], env: Mapping[str, str], sandbox: Sandbox, *,
                  timeout_s: float, memory_bytes: int | None) -> Finished:
    """Run ``cmd`` in ``sandbox`` until it exits, ``timeout_s`` passes or its processes
    together hold more than ``memory_bytes``; the sandbox is released after (nothing it
    started outlives it, and no descendant holding its pipes can keep us waiting)."""
    import threading
    import time

    proc = SPAWNER.popen(cmd, env={**env, **sandbox.environment()}, text=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    sandbox.root_pid = proc.pid
    chunks: dict[str, list[str]] = {"out": [], "err": []}
    readers = [threading.Thread(target=lambda s=stream, k=key: chunks[k].append(s.read()),
                                daemon=True)
               for stream, key in ((proc.stdout, "out"), (proc.stderr, "err"))]
    for reader in readers:
        reader.start()
    stopped, deadline = None, time.monotonic() + timeout_s
    try:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                stopped = "timeout"
                break
            if memory_bytes is not None and sandbox.resident_bytes() > memory_bytes:
                stopped = "memory"
                break
            time.sleep(0.05)
    finally:
        sandbox.release()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for reader in readers:
            reader.join(timeout=5)
    return Finished(proc.returncode, "".join(chunks["out"]), "".join(chunks["err"]), stopped)
