"""Keeping a user's kernel code away from the service's secrets (README, "Security").

Code from a user's kernel file runs only in child processes (bench, compile and describe
processes) started with ``sandbox_environment()``: an *allowlist* of variables, so no
credential is ever in their environment. Their ancestors hold the credentials (the worker, its
pool process, the scheduler, ``tuner tune``); those call ``protect_process()`` at start-up,
which marks them non-dumpable: the kernel's ``/proc/<pid>/environ``, ``/proc/<pid>/mem`` and
``ptrace`` of them are refused even though both run as the same user. A sandboxed child is
killed when the thread that started it goes away (``PR_SET_PDEATHSIG``),
so no bench process outlives its worker or its ``tuner tune``: the child calls
``die_with_parent(int(os.environ[PARENT_VARIABLE]))`` first thing.

Linux only (``prctl``); elsewhere the calls are no-ops and ``protect_process`` says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Mapping

#: Variables a sandboxed child may inherit (exact names).
ALLOWED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV",
    "LD_LIBRARY_PATH", "CC", "CXX", "XDG_CACHE_HOME",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
})
#: Variables a sandboxed child may inherit (name prefixes: compilers, drivers and locales).
ALLOWED_PREFIXES = ("LC_", "TRITON_", "CUDA_", "NVIDIA_", "HIP_", "ROCM_", "ROCR_",
                    "HSA_", "TORCH_CUDA_ARCH", "TUNER_SANDBOX_")
#: Words that keep a variable out even when its name matches an allowed prefix.
SECRET_WORDS = ("PASSWORD", "SECRET", "TOKEN", "KEY", "CREDENTIAL", "URL", "DSN", "AUTH")

PR_SET_PDEATHSIG = 1
#: Set by ``sandbox_environment``: the pid of the process that starts the child.
PARENT_VARIABLE = "TUNER_SANDBOX_PARENT"
PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def is_allowed(name: str) -> bool:
    """True if a sandboxed child may see the variable ``name``."""
    upper = name.upper()
    if any(word in upper for word in SECRET_WORDS):
        return False
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def sandbox_environment(extra: Mapping[str, str] | None = None,
                        env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child that runs user kernel code: the allowlisted part of ``env``
    (default ``os.environ``) plus ``extra`` (the caller's own, non-secret settings)."""
    source = os.environ if env is None else env
    out = {k: v for k, v in source.items() if is_allowed(k)}
    out["PYTHONUNBUFFERED"] = "1"
    out[PARENT_VARIABLE] = str(os.getpid())
    out.update(extra or {})
    return out


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def protect_process() -> bool:
    """Make this process non-dumpable (its ``/proc/<pid>/environ`` and memory unreadable, no
    ``ptrace``, no core dumps) for the rest of its life and its forks'. True if it took effect.

    Call it first thing in every process that holds a credential and starts children that
    run user code; ``execve`` of a child resets the flag, so sandboxed children are unaffected.
    """
    libc = _libc()
    if libc is None:
        return False
    return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 and is_protected()


def is_protected() -> bool:
    libc = _libc()
    return libc is not None and libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0


def die_with_parent(parent_pid: int) -> None:
    """In a child: be killed (SIGKILL) when the parent goes away; exit now if it already
    has (it died between the fork and this call)."""
    libc = _libc()
    if libc is not None:
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(70)


def die_with_starter(env: Mapping[str, str] | None = None) -> None:
    """``die_with_parent`` for a child started with ``sandbox_environment`` (no-op when the
    variable is absent: the child was started by hand)."""
    value = (os.environ if env is None else env).get(PARENT_VARIABLE, "")
    if value.isdigit():
        die_with_parent(int(value))


PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def confine() -> None:
    """In a sandboxed child, before any user code: no new privileges ever (setuid binaries
    gain nothing), and — when running as root — every capability dropped, from the bounding
    set too, so neither this process nor anything it executes can read a non-dumpable
    process's memory or environment (``CAP_SYS_PTRACE``) or bypass file permissions."""
    libc = _libc()
    if libc is None:
        return
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.geteuid() != 0:
        return
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed: the sandbox would keep root's powers")
