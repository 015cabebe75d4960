"""The worker's side of the isolated bench process (DESIGN.md decision 2).

``BenchProcess`` spawns ``python -m tuner.measure.bench_child`` (a fresh interpreter: never a
fork of a process that touched CUDA), sends it one request at a time and waits for its events
with two deadlines: ``compile_timeout_s`` until the first call returns, ``run_timeout_s`` for the
correctness check and timing. A deadline missed kills the process (``timeout``); a process that
dies mid-request is a ``crashed`` trial, with its exit code or signal and the tail of its
stderr. Either way the next request gets a new process, so the worker carries on.

The calling process never imports torch's CUDA state: the child owns the device. The child
gets an allowlisted environment and dies with the thread that started it
(``tuner.core.sandbox``): it holds no credential and never outlives its worker.

**A process serves one tenant**: the job its requests belong to (``job-<id>``), or the local
run it was made for (``tenant=``). A request of another job gets a fresh process, so no job's
code can tamper with the measuring code another job's results pass through, and a kernel file
edited between two jobs is imported anew. The process runs in a ``tuner.core.isolation``
sandbox: its own user and no network where the host allows, its whole process tree killed and
its memory capped together, the tenant's own Triton cache.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO
from typing import Any

from tuner.core.isolation import Sandbox
from tuner.core.isolation import open_sandbox
from tuner.core.sandbox import sandbox_environment
from tuner.core.spawner import SPAWNER
from tuner.core.target import as_target
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Confirmation
from tuner.core.types import Measurement
from tuner.core.types import StaticResult
from tuner.core.types import TrialStatus
from tuner.measure.gpus import physical_gpu

#: Seconds between two reads of a bench process's resident set.
MEMORY_POLL_S = 0.05
#: Every this many reads, the resident set of everything in its sandbox is summed instead.
TREE_POLL_EVERY = 10


def resident_bytes(pid: int) -> int | None:
    """Resident set of process ``pid`` in bytes (Linux ``/proc``; ``None`` elsewhere)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class BenchStartError(RuntimeError):
    """The bench process could not start or calibrate its device."""


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


class BenchProcess:
    """One long-lived bench subprocess: the device of one backend (``interpret``, ``cuda[:N]``,
    ``standin:<kind>``), or, with ``compile_for``, a compile-only process for that GPU kind."""

    def __init__(self, backend: str | None = None, *, compile_for: str | None = None,
                 cache_dir: Path | None = None,
                 kernel_roots: tuple[Path, ...] = (), startup_timeout_s: float = 300.0,
                 extra_env: dict[str, str] | None = None,
                 memory_bytes: int | None = None, tenant: str | None = None) -> None:
        """``memory_bytes``: the process (with everything it started) is killed once their
        resident set exceeds this, and its request ends ``out_of_resources`` (``None``: no
        cap). ``tenant``: the one tenant every request is served for (a local run); default:
        the job of each request."""
        if (backend is None) == (compile_for is None):
            raise ValueError("a bench process runs a backend or compiles for a GPU kind")
        self.backend = backend
        self.compile_for = compile_for
        #: What it is, in messages.
        self.label = backend or f"compiling for {compile_for}"
        self.tenant = tenant
        self.serving: str | None = None  # the tenant the live process serves
        self.sandbox: Sandbox | None = None
        self.cache_dir = cache_dir
        self.kernel_roots = kernel_roots
        self.startup_timeout_s = startup_timeout_s
        self.extra_env = dict(extra_env or {})
        self.device: dict[str, Any] = {}
        self.ceilings: dict[str, Any] = {}
        self.restarts = 0
        self.memory_bytes = memory_bytes
        self._over_memory: int | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=60)
        self._lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _env(self, sandbox: Sandbox) -> dict[str, str]:
        env = sandbox_environment()  # an allowlist: no credential reaches user code
        target = as_target(self.backend) if self.backend else None
        if target is not None and target.is_interpreter:
            env["TRITON_INTERPRET"] = "1"
            # One core per trial: stable timings when several bench processes share a host.
            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                env[var] = "1"
        env.update(sandbox.environment())  # its Triton cache: the tenant's, nobody else's
        if target is not None and target.gpu_index is not None:  # logical → physical GPU
            env["CUDA_VISIBLE_DEVICES"] = physical_gpu(target.gpu_index)
        if target is None or not target.is_interpreter:
            env.pop("TRITON_INTERPRET", None)
        env.update(self.extra_env)
        return env

    def tenant_of(self, request: BenchmarkRequest) -> str:
        return self.tenant or f"job-{request.job_id}"

    def serve(self, request: BenchmarkRequest) -> None:
        """Make sure the live process serves ``request``'s tenant (a fresh one if not)."""
        tenant = self.tenant_of(request)
        if self.pid is not None and self.serving != tenant:
            self.close()
        if self.pid is None:
            if self._proc is not None:
                self.restarts += 1
            self.start(tenant)

    def start(self, tenant: str | None = None) -> None:
        """Spawn the process for ``tenant`` (default: the fixed tenant, else none yet) and
        wait for its ``ready`` event (device calibrated)."""
        if self.pid is not None:
            return
        tenant = tenant or self.tenant or "unassigned"
        if self.sandbox is not None:
            self.sandbox.release()
        self.sandbox = open_sandbox(tenant, self.cache_dir)
        self.serving = tenant
        cmd = [sys.executable, "-m", "tuner.measure.bench_child"]
        cmd += [self.backend] if self.backend else ["--compile-for", str(self.compile_for)]
        if self.cache_dir is not None:
            cmd += ["--cache-dir", str(self.cache_dir)]
        for root in self.kernel_roots:
            cmd += ["--kernel-root", str(root)]
        self._events = queue.Queue()
        self._stderr.clear()
        self._over_memory = None
        self._proc = SPAWNER.popen(  # from a thread that lives as long as this process
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=self._env(self.sandbox), start_new_session=True,
        )
        self.sandbox.root_pid = self._proc.pid
        assert self._proc.stdout is not None and self._proc.stderr is not None
        threading.Thread(target=self._read_events, args=(self._proc.stdout, self._events),
                         daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(self._proc.stderr,),
                         daemon=True).start()
        if self.memory_bytes is not None:
            threading.Thread(target=self._watch_memory, args=(self._proc,), daemon=True).start()
        event = self._next_event(self.startup_timeout_s)
        if event is None or event.get("event") != "ready":
            reason = (event or {}).get("error") or self._exit_reason()
            self.kill()
            raise BenchStartError(f"bench process {self.label} did not start: {reason}")
        self.device = dict(event.get("device", {}))
        self.ceilings = dict(event.get("ceilings", {}))
        self.device["sandbox"] = event.get("sandbox")
        _keep_calibration(self.cache_dir, event.get("calibration"))

    def kill(self) -> None:
        """Kill the process and everything it started (its sandbox), then reap it."""
        proc, self._proc = self._proc, None
        sandbox, self.sandbox = self.sandbox, None
        self.serving = None
        if proc is None:
            if sandbox is not None:
                sandbox.release()
            return
        if sandbox is not None:
            sandbox.release()  # the whole tree: nothing keeps our pipes open after this
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def close(self) -> None:
        """Ask the process to exit, then make sure it has. What it started dies first, while
        the process still holds it in its tree (``Sandbox.kill_descendants``)."""
        proc = self._proc
        if self.sandbox is not None:
            self.sandbox.kill_descendants()
        if proc is not None and proc.poll() is None and proc.stdin is not None:
            try:
                proc.stdin.write(json.dumps({"type": "exit"}) + "\n")
                proc.stdin.flush()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def _watch_memory(self, proc: subprocess.Popen[str]) -> None:
        """Kill ``proc`` (its whole session) once its resident set exceeds the cap."""
        assert self.memory_bytes is not None
        sandbox = self.sandbox
        polls = 0
        while proc.poll() is None:
            # the process itself every poll; everything it started every tenth (a /proc scan)
            polls += 1
            whole = sandbox is not None and polls % TREE_POLL_EVERY == 0
            rss = sandbox.resident_bytes() if whole and sandbox is not None \
                else resident_bytes(proc.pid)
            if rss is not None and rss > self.memory_bytes:
                self._over_memory = rss
                if sandbox is not None:
                    sandbox.kill_all()
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                return
            time.sleep(MEMORY_POLL_S)

    def _memory_failure(self, **extra: Any) -> Measurement | None:
        if self._over_memory is None or self.memory_bytes is None:
            return None
        return Measurement.failure(
            TrialStatus.OUT_OF_RESOURCES,
            f"host memory: the bench process (and what it started) used "
            f"{self._over_memory / 2**30:.2f} GiB, above "
            f"its cap of {self.memory_bytes / 2**30:.2f} GiB (--bench-memory); killed", **extra)

    # -- I/O ------------------------------------------------------------------------------------
    @staticmethod
    def _read_events(stream: IO[str], sink: queue.Queue[dict[str, Any] | None]) -> None:
        for line in stream:
            try:
                sink.put(json.loads(line))
            except ValueError:
                continue
        sink.put(None)  # EOF: the process is gone

    def _read_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line.rstrip("\n"))

    def _next_event(self, timeout_s: float) -> dict[str, Any] | None:
        """The next event, ``None`` at EOF; raises ``TimeoutError`` past the deadline."""
        try:
            return self._events.get(timeout=max(timeout_s, 0.0))
        except queue.Empty:
            raise TimeoutError from None

    def _exit_reason(self) -> str:
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        tail = "\n".join(list(self._stderr)[-20:])
        what = _signal_name(code) if code is not None else "stopped answering"
        return f"bench process {what}" + (f"; stderr tail:\n{tail}" if tail else "")

    # -- one request ----------------------------------------------------------------------------
    def check(self, request: BenchmarkRequest, inspect: bool = True) -> StaticResult:
        """Static check of ``request`` in a ``compile_for`` process (compile timeout);
        ``inspect=False``: compile only, without reading registers and spills."""
        with self._lock:
            target = self.compile_for or ""
            self.serve(request)
            assert self._proc is not None and self._proc.stdin is not None
            try:
                self._proc.stdin.write(json.dumps({"type": "check", "inspect": inspect,
                                                   "request": request.to_json()}) + "\n")
                self._proc.stdin.flush()
                event = self._next_event(request.compile_timeout_s)
            except TimeoutError:
                self.kill()
                return StaticResult(status="timeout", target=target,
                                    error=f"compile exceeded {request.compile_timeout_s:g} s")
            except OSError:
                event = None
            if event is None or event.get("event") != "checked":
                reason = self._exit_reason()
                self.kill()
                return StaticResult(status="crashed", target=target, error=reason)
            return StaticResult.from_json(event["result"])

    def confirm(self, request: BenchmarkRequest) -> Confirmation:
        """Re-time the request's finalists interleaved (or say why it could not).

        Always in a fresh process: nothing an earlier config did to this one (state left
        behind, patched code) can reach the figures a winner is chosen by. The deadline is
        both timeouts per finalist."""
        with self._lock:
            self.close()
            self.serve(request)
            assert self._proc is not None and self._proc.stdin is not None
            deadline = (request.compile_timeout_s + request.run_timeout_s) * max(
                1, len(request.finalists or []))
            try:
                self._proc.stdin.write(json.dumps({"type": "confirm",
                                                   "request": request.to_json()}) + "\n")
                self._proc.stdin.flush()
                event = self._next_event(deadline)
            except TimeoutError:
                self.kill()
                return Confirmation.failed(f"confirmation exceeded {deadline:g} s")
            except OSError:
                event = None
            if event is None or event.get("event") != "confirmed":
                reason = self._exit_reason()
                self.kill()
                return Confirmation.failed(reason)
            if event.get("fatal"):
                self.kill()
            return Confirmation.from_json(event)

    def run(self, request: BenchmarkRequest) -> Measurement:
        """Measure ``request``; every failure (crash, hang, bad output) is a ``Measurement``.

        Its ``phases`` gain when the request held this process's device: ``device_start`` and
        ``device_end`` (unix seconds) and ``device_s``."""
        with self._lock:
            wall, start = time.time(), time.perf_counter()
            measurement = self._run(request)
            held = time.perf_counter() - start
            return dataclasses.replace(measurement, phases={
                **measurement.phases, "device_start": wall, "device_end": wall + held,
                "device_s": held})

    def _run(self, request: BenchmarkRequest) -> Measurement:
        self.serve(request)
        assert self._proc is not None and self._proc.stdin is not None
        extra = {"device_kind": self.device.get("device_kind"), "ceilings": self.ceilings or None}
        try:
            self._proc.stdin.write(json.dumps({"type": "bench", "request": request.to_json()})
                                   + "\n")
            self._proc.stdin.flush()
        except OSError:
            reason = self._exit_reason()
            self.kill()
            return Measurement.failure(TrialStatus.CRASHED, reason, **extra)
        phase, deadline_s = "compile", request.compile_timeout_s
        started = time.monotonic()
        while True:
            remaining = deadline_s - (time.monotonic() - started)
            try:
                event = self._next_event(remaining)
            except TimeoutError:
                self.kill()
                self.restarts += 1
                return Measurement.failure(
                    TrialStatus.TIMEOUT,
                    f"{phase} exceeded {deadline_s:g} s; bench process killed", **extra)
            if event is None:
                reason = self._exit_reason()
                self.kill()
                self.restarts += 1
                return self._memory_failure(**extra) or Measurement.failure(
                    TrialStatus.CRASHED, f"during {phase}: {reason}", **extra)
            kind = event.get("event")
            if kind == "compiled":
                phase, deadline_s, started = "run", request.run_timeout_s, time.monotonic()
            elif kind == "result":
                measurement = Measurement.from_json(event["measurement"])
                if event.get("fatal"):
                    self.kill()
                    self.restarts += 1
                return measurement


def _keep_calibration(cache_dir: Path | None, calibration: Any) -> None:
    """Store the ceilings a fresh process measured (before it ran any user code) where the
    next one finds them: the process itself may not write the shared cache folder."""
    if cache_dir is None or not isinstance(calibration, dict):
        return
    name, data = calibration.get("file"), calibration.get("data")
    if not isinstance(name, str) or not name.startswith("ceilings-") or "/" in name \
            or not isinstance(data, dict):
        return
    path = cache_dir / name
    if path.exists():
        return
    with contextlib.suppress(OSError):
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
