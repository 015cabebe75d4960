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
* ``{"type": "check", "request": {...}}`` (backend ``compile:<device kind>``) →
  ``{"event": "checked", "result": {...}}``: a static check, compiled for the target only
  (``"inspect": false``: without reading registers and spills from the cubin);
* backend ``standin:<device kind>`` (``tuner.measure.standin``): ``bench`` and ``confirm`` as
  above, with real compiles and simulated device time;
* ``{"type": "ping"}`` → ``{"event": "pong"}``; ``{"type": "exit"}`` or EOF → exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import IO
from typing import Any


def _send(stream: IO[str], event: dict[str, Any]) -> None:
    stream.write(json.dumps(event) + "\n")
    stream.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tuner.measure.bench_child")
    parser.add_argument("backend")
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
        from tuner.core.target import Evidence
        from tuner.core.target import as_target
        from tuner.core.types import BenchmarkRequest
        from tuner.measure.bench import run_request
        from tuner.measure.devices import make_device

        target = as_target(args.backend)
        if target.checks_only and target.gpu_kind:
            from tuner.measure.static_check import CompileDevice

            compiler = CompileDevice(target.gpu_kind)
            _send(proto, {"event": "ready", "device": compiler.describe(), "ceilings": {},
                          "pid": os.getpid(), "sandbox": sandbox})
            return _serve_checks(proto, compiler, tuple(args.kernel_root))
        if target.evidence is Evidence.SIMULATED and target.gpu_kind:
            from tuner.measure.standin import StandInDevice

            standin = StandInDevice(target.gpu_kind, tuple(args.kernel_root))
            _send(proto, {"event": "ready", "device": standin.describe(), "ceilings": {},
                          "pid": os.getpid(), "sandbox": sandbox})
            return _serve_standin(proto, standin, tuple(args.kernel_root))
        from tuner.measure.calibrate import LAST_CALIBRATION

        device = make_device(args.backend, args.cache_dir)
        _send(proto, {"event": "ready", "device": device.describe(),
                      "ceilings": device.ceilings(), "pid": os.getpid(), "sandbox": sandbox,
                      "calibration": LAST_CALIBRATION})
    except Exception as exc:
        _send(proto, {"event": "failed", "error": f"{type(exc).__name__}: {exc}"})
        return 2

    roots = tuple(args.kernel_root)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
            kind = message.get("type")
        except (ValueError, AttributeError):
            _send(proto, {"event": "error", "error": "malformed message"})
            continue
        if kind == "exit":
            return 0
        if kind == "ping":
            _send(proto, {"event": "pong"})
            continue
        if kind == "confirm":
            from tuner.measure.bench import run_confirmation

            confirmed = run_confirmation(device, BenchmarkRequest.from_json(message["request"]),
                                         roots)
            _send(proto, {"event": "confirmed", **confirmed})
            if confirmed.get("fatal"):
                return 3
            continue
        if kind != "bench":
            _send(proto, {"event": "error", "error": f"unknown message type {kind!r}"})
            continue
        request = BenchmarkRequest.from_json(message["request"])
        outcome = run_request(
            device, request, roots,
            on_compiled=lambda s: _send(proto, {"event": "compiled", "compile_s": s}))
        _send(proto, {"event": "result", "measurement": outcome.measurement.to_json(),
                      "fatal": outcome.fatal})
        if outcome.fatal:
            return 3
    return 0


def _serve_checks(proto: IO[str], compiler: Any, roots: tuple[Path, ...]) -> int:
    from tuner.core.types import BenchmarkRequest

    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if message.get("type") == "exit":
            return 0
        if message.get("type") != "check":
            _send(proto, {"event": "error", "error": "a compile process only checks"})
            continue
        result = compiler.check(BenchmarkRequest.from_json(message["request"]), roots,
                                inspect=bool(message.get("inspect", True)))
        _send(proto, {"event": "checked", "result": result.to_json()})
    return 0


def _serve_standin(proto: IO[str], standin: Any, roots: tuple[Path, ...]) -> int:
    """The protocol for a ``standin:<kind>`` device (simulated timing)."""
    from tuner.core.types import BenchmarkRequest

    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        kind = message.get("type")
        if kind == "exit":
            return 0
        if kind not in ("bench", "confirm"):
            _send(proto, {"event": "error", "error": f"unknown message type {kind!r}"})
            continue
        request = BenchmarkRequest.from_json(message["request"])
        if kind == "confirm":
            _send(proto, {"event": "confirmed", **standin.model.confirm(request)})
            continue
        measurement = standin.run(
            request, roots,
            on_compiled=lambda s: _send(proto, {"event": "compiled", "compile_s": s}))
        _send(proto, {"event": "result", "measurement": measurement.to_json(), "fatal": False})
    return 0


if __name__ == "__main__":
    sys.exit(main())
