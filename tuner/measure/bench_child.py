"""Entry point of the isolated bench process: ``python -m tuner.measure.bench_child BACKEND``.

Protocol (newline-delimited JSON; requests on stdin, events on the original stdout, which is
reserved for the protocol: anything the kernel prints goes to stderr):

* at start: ``{"event": "ready", "device": {...}, "ceilings": {...}}``
  or ``{"event": "failed", "error": "..."}`` and exit 2;
* ``{"type": "bench", "request": {...}}`` → ``{"event": "compiled", "compile_s": …}`` then
  ``{"event": "result", "measurement": {...}, "fatal": bool}``; after a fatal result the
  process exits (a sticky CUDA error poisons the context);
* ``{"type": "confirm", "request": {...}}`` → ``{"event": "confirmed", "timings": [...]}``:
  the request's finalists re-timed interleaved (``tuner.measure.bench.run_confirmation``);
* ``{"type": "check", "request": {...}}`` (``--compile-for <device kind>``) →
  ``{"event": "checked", "result": {...}}``: a static check, compiled for the target only
  (``"inspect": false``: without reading registers and spills from the cubin);
* backend ``standin:<device kind>`` (``tuner.measure.devices.standin``): ``bench`` and ``confirm``
as
  above, with real compiles and simulated device time;
* ``{"type": "ping"}`` → ``{"event": "pong"}``; ``{"type": "exit"}`` or EOF → exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from typing import Any

from tuner.core.types import BenchmarkRequest
from tuner.core.types import Confirmation
from tuner.core.types import Measurement
from tuner.core.types import StaticResult


def _send(stream: IO[str], event: dict[str, Any]) -> None:
    stream.write(json.dumps(event) + "\n")
    stream.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tuner.measure.bench_child")
    parser.add_argument("backend", nargs="?", help="the backend whose device it runs")
    parser.add_argument("--compile-for", help="a GPU kind: compile-only static checks")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--kernel-root", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    from tuner.core.isolation import enter_sandbox
    from tuner.core.sandbox import confine
    from tuner.core.sandbox import die_with_starter

    try:  # its own user and no network (where the host allows), before anything else
        sandbox = enter_sandbox()
    except OSError as exc:
        print(json.dumps({"event": "failed", "error": f"cannot enter the sandbox: {exc}"}),
              flush=True)
        return 2
    die_with_starter()  # never outlive the worker (or ``tuner tune``) that started us
    confine()  # no capability (when root) and no new privileges before any user code

    # Keep the protocol stream private: fd 1 becomes stderr for everything else.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    try:
        server = _server(args)
    except Exception as exc:
        _send(proto, {"event": "failed", "error": f"{type(exc).__name__}: {exc}"})
        return 2
    _send(proto, {"event": "ready", **server.ready, "pid": os.getpid(), "sandbox": sandbox})
    return serve(proto, server, sys.stdin)


@dataclass(frozen=True)
class Message:
    """One request to the bench process: ``kind`` is ``bench``, ``confirm``, ``check``,
    ``ping`` or ``exit``; the first three carry a request."""

    kind: str
    request: BenchmarkRequest | None = None
    inspect: bool = True

    @classmethod
    def parse(cls, line: str) -> Message:
        """``ValueError`` for anything that is not one well-formed message."""
        from tuner.core.types import BenchmarkRequest

        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("a message is a JSON object")
        if data.get("type") not in KINDS:
            raise ValueError(f"unknown message type {data.get('type')!r}")
        kind = str(data["type"])
        if kind in ("ping", "exit"):
            return cls(kind)
        if not isinstance(data.get("request"), dict):
            raise ValueError(f"a {kind} message carries a request")
        return cls(kind, BenchmarkRequest.from_json(data["request"]),
                   bool(data.get("inspect", True)))


KINDS = ("bench", "confirm", "check", "ping", "exit")


class Server:
    """What one bench process does with a request: its device's (``bench``, ``confirm``) or
    a compiler's (``check``). A message it does not serve is answered with an error event."""

    ready: dict[str, Any]  #: what the ``ready`` event says about the device
    serves: tuple[str, ...] = ()

    def bench(self, request: BenchmarkRequest,
              on_compiled: Callable[[float | None], None]) -> tuple[Measurement, bool]:
        """The measurement and whether the device is unusable after it (fatal)."""
        raise NotImplementedError

    def confirm(self, request: BenchmarkRequest) -> Confirmation:
        raise NotImplementedError

    def check(self, request: BenchmarkRequest, inspect: bool) -> StaticResult:
        raise NotImplementedError


class DeviceServer(Server):
    """``interpret`` or ``cuda``: real kernels, timed."""

    serves = ("bench", "confirm")

    def __init__(self, backend: str, cache_dir: Path | None, roots: tuple[Path, ...]) -> None:
        from tuner.measure.calibrate import LAST_CALIBRATION
        from tuner.measure.devices.hardware import make_device

        self.device = make_device(backend, cache_dir)
        self.roots = roots
        if os.environ.get("TRITON_INTERPRET") == "1":  # libdevice math the interpreter lacks
            from tuner.kernels.interpreter_math import install

            install()
        self.ready = {"device": self.device.describe(), "ceilings": self.device.ceilings(),
                      "calibration": LAST_CALIBRATION}

    def bench(self, request: BenchmarkRequest,
              on_compiled: Callable[[float | None], None]) -> tuple[Measurement, bool]:
        from tuner.measure.bench import run_request

        outcome = run_request(self.device, request, self.roots, on_compiled)
        return outcome.measurement, outcome.fatal

    def confirm(self, request: BenchmarkRequest) -> Confirmation:
        from tuner.core.types import Confirmation
        from tuner.measure.bench import run_confirmation

        return Confirmation.from_json(run_confirmation(self.device, request, self.roots))


class StandInServer(Server):
    """``standin:<kind>``: real compiles for the kind, simulated device time."""

    serves = ("bench", "confirm")

    def __init__(self, kind: str, roots: tuple[Path, ...]) -> None:
        from tuner.measure.devices.standin import StandInDevice

        self.standin = StandInDevice(kind, roots)
        self.roots = roots
        self.ready = {"device": self.standin.describe(), "ceilings": {}}

    def bench(self, request: BenchmarkRequest,
              on_compiled: Callable[[float | None], None]) -> tuple[Measurement, bool]:
        return self.standin.run(request, self.roots, on_compiled), False

    def confirm(self, request: BenchmarkRequest) -> Confirmation:
        return self.standin.model.confirm(request)


class CompileServer(Server):
    """``--compile-for <kind>``: static checks for a GPU kind, nothing runs."""

    serves = ("check",)

    def __init__(self, kind: str, roots: tuple[Path, ...]) -> None:
        from tuner.measure.static_check import CompileDevice

        self.compiler = CompileDevice(kind)
        self.roots = roots
        self.ready = {"device": self.compiler.describe(), "ceilings": {}}

    def check(self, request: BenchmarkRequest, inspect: bool) -> StaticResult:
        return self.compiler.check(request, self.roots, inspect=inspect)


def _server(args: argparse.Namespace) -> Server:
    from tuner.core.target import Evidence
    from tuner.core.target import as_target

    roots = tuple(args.kernel_root)
    if args.compile_for:
        return CompileServer(args.compile_for, roots)
    target = as_target(args.backend or "")
    if target.evidence is Evidence.SIMULATED and target.gpu_kind:
        return StandInServer(target.gpu_kind, roots)
    return DeviceServer(args.backend, args.cache_dir, roots)


def serve(proto: IO[str], server: Server, lines: Iterable[str]) -> int:
    """Answer each message of ``lines`` until ``exit`` or their end (0), or until a fatal
    result (3: the device is unusable)."""
    for line in lines:
        if not line.strip():
            continue
        try:
            message = Message.parse(line)
        except (ValueError, TypeError, KeyError) as exc:
            _send(proto, {"event": "error", "error": f"malformed message: {exc}"})
            continue
        if message.kind == "exit":
            return 0
        if message.kind == "ping":
            _send(proto, {"event": "pong"})
            continue
        request = message.request
        assert request is not None
        if message.kind not in server.serves:
            _send(proto, {"event": "error", "error": f"this process does not {message.kind}"})
        elif message.kind == "check":
            _send(proto, {"event": "checked",
                          "result": server.check(request, message.inspect).to_json()})
        elif message.kind == "confirm":
            confirmed = server.confirm(request)
            _send(proto, {"event": "confirmed", **confirmed.to_json()})
            if confirmed.fatal:
                return 3
        else:
            measurement, fatal = server.bench(
                request, lambda s: _send(proto, {"event": "compiled", "compile_s": s}))
            _send(proto, {"event": "result", "measurement": measurement.to_json(),
                          "fatal": fatal})
            if fatal:
                return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
