"""Measure one request on one device: compile ▶ check ▶ time. Runs inside the bench process.

1. Fresh seeded inputs; the output buffer is poisoned with NaN.
2. First call (``compile`` phase: Triton JIT-compiles here; the parent's compile timeout covers
   it). ``on_compiled`` is called when it returns, so the parent switches to the run timeout.
3. The output is compared with the torch reference: relative Frobenius error in float64 must be
   at most the kernel's tolerance for the dtype, and any NaN/Inf fails (``wrong_result``).
4. Only then is the config timed (``device.time``).

Exceptions become statuses (``classify``); they never escape. A sticky CUDA error is reported
with ``fatal=True`` so the process exits and is replaced.
"""

from __future__ import annotations

import functools
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import torch

from search_spaces import Context
from tuner.core.devices.datasheets import target_limits
from tuner.core.types import BenchmarkRequest
from tuner.core.types import Measurement
from tuner.core.types import TrialStatus
from tuner.kernels import KernelError
from tuner.kernels import load_kernel
from tuner.kernels.spec import ConfigRejected
from tuner.measure.compile_watch import watch_compiles
from tuner.measure.interpreter_limits import explain as explain_interpreter_limit
from tuner.measure.interpreter_limits import innermost_user_frame
from tuner.measure.timing import summarise

if TYPE_CHECKING:
    from tuner.measure.devices.hardware import BenchDevice


@dataclass(frozen=True)
class Outcome:
    measurement: Measurement
    fatal: bool = False


def classify(exc: BaseException) -> TrialStatus:
    """Map an exception raised while compiling or running a config to a trial status."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import InterpreterError
    from triton.runtime.errors import OutOfResources

    if isinstance(exc, ConfigRejected):  # the kernel's own pruning, on every backend
        return TrialStatus.INVALID
    if isinstance(exc, OutOfResources | torch.OutOfMemoryError):
        return TrialStatus.OUT_OF_RESOURCES
    if isinstance(exc, CompilationError | InterpreterError):
        # The interpreter wraps frontend errors (non-power-of-two aranges, failed static
        # asserts) in InterpreterError: on a GPU these are compile errors.
        return TrialStatus.COMPILE_ERROR
    name = type(exc).__name__
    if name == "PTXASError":
        text = str(exc).lower()
        if "out of resource" in text or "register" in text or "entry function" in text:
            return TrialStatus.OUT_OF_RESOURCES
        return TrialStatus.COMPILE_ERROR
    return TrialStatus.CRASHED


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (Frobenius); ``inf`` when out has NaN/Inf."""
    o = out.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    if o.shape != r.shape:
        raise ValueError(f"output shape {tuple(o.shape)} != reference shape {tuple(r.shape)}")
    if not bool(torch.isfinite(o).all()):
        return float("inf")
    denom = float(torch.linalg.vector_norm(r))
    diff = float(torch.linalg.vector_norm(o - r))
    return diff / denom if denom > 0 else diff


def _poison_output(kernel: Any, tensors: dict[str, torch.Tensor], problem: Any,
                   expected: torch.Tensor) -> None:
    """Fill the output with NaN, unless the kernel also reads it (an in-place or accumulating
    kernel, checklist #9: its reference changes when the output does); then the output keeps
    its fresh values, and the check still runs on the first call with fresh inputs."""
    out = tensors[kernel.output]
    fresh = out.clone()
    out.fill_(float("nan"))
    if not bool(torch.isfinite(expected).all()):
        return
    again = _answers(kernel.reference(_copies(tensors), problem))[0]
    if not bool(torch.isfinite(again).all()):
        out.copy_(fresh)


def _copies(tensors: dict[str, Any]) -> dict[str, Any]:
    """Fresh copies of the tensors (other launch arguments as they are) for the reference."""
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in tensors.items()}


def _answers(expected: Any) -> list[torch.Tensor]:
    return list(expected) if isinstance(expected, tuple | list) else [expected]


def _output_error(kernel: Any, tensors: dict[str, Any], expected: list[torch.Tensor]) -> float:
    """The largest relative error over the kernel's outputs (``ValueError`` when the outputs
    and the reference's answers do not pair up)."""
    outs = [tensors[kernel.output]] if kernel.outputs is None else kernel.outputs(tensors)
    if len(outs) != len(expected):
        raise ValueError(f"the kernel gave {len(outs)} output(s), the reference "
                         f"{len(expected)}")
    return max(relative_error(o, e) for o, e in zip(outs, expected, strict=True))


def user_frame(exc: BaseException) -> str | None:
    """``function, file.py:line`` of the innermost frame of ``exc`` in the user's own code
    (outside the service and installed packages), or None when there is none."""
    frame = innermost_user_frame(exc)
    return None if frame is None else f"{frame.name}, {Path(frame.filename).name}:{frame.lineno}"


def _error_text(exc: BaseException) -> str:
    """One first line that names the exception and where in the user's code it was raised
    (``KeyError: 'n' (in prune, my_kernel.py:14)``), then the end of the traceback."""
    tb = "".join(traceback.format_exception(exc, limit=-3))
    where = user_frame(exc)
    first = f"{type(exc).__name__}: {exc}".split("\n")[0][:500]
    return (f"{first}" + (f" (in {where})" if where else "") + f"\n{tb}")[-4000:]


def run_request(device: BenchDevice, request: BenchmarkRequest, roots: tuple[Path, ...],
                on_compiled: Callable[[float | None], None]) -> Outcome:
    """Measure ``request`` on ``device``; see the module docstring for the steps."""
    base: dict[str, Any] = {"device_kind": device.kind, "ceilings": device.ceilings()}
    try:
        kernel = load_kernel(request.kernel, roots)
    except KernelError as exc:
        on_compiled(None)
        return Outcome(Measurement.failure(TrialStatus.COMPILE_ERROR, str(exc), **base))
    # Constraints the kernel's module registered itself were deferred where it is not
    # imported (the scheduler, the CLI): this is where they apply. A config outside the
    # space's domain is left to fail as it would (the backend contract's bad configs).
    ctx = Context(problem=dict(request.problem), dtype=request.dtype,
                  target=target_limits(request.device_kind))
    violations = [] if kernel.space.domain_errors(request.params) else \
        kernel.space.violations(request.params, ctx)
    if violations:
        on_compiled(None)
        return Outcome(Measurement.failure(TrialStatus.INVALID, "; ".join(violations), **base))
    try:  # the kernel's own code: a failure here is the trial's, never the bench process's
        counts: dict[str, Any] = {
            "flops": kernel.flops(request.problem, request.dtype),
            "min_bytes": kernel.min_bytes(request.problem, request.dtype),
            "compute_dtype": kernel.compute_dtype(request.dtype),
            "exps": kernel.exps(request.problem) if kernel.exps else None}
    except Exception as exc:
        on_compiled(None)
        return Outcome(Measurement.failure(classify(exc), f"[counts] {_error_text(exc)}",
                                           **base))
    phase = "compile"
    try:
        tensors = kernel.make_inputs(request.problem, request.dtype, request.seed,
                                     device.torch_device)
        expected = _answers(kernel.reference(_copies(tensors), request.problem))
        if kernel.outputs is None and tensors[kernel.output].is_floating_point():
            # a kernel that never writes its output must not pass
            _poison_output(kernel, tensors, request.problem, expected[0])

        def call() -> None:
            kernel.launch(tensors, request.problem, request.params)

        start = time.perf_counter()
        with watch_compiles() as compiles:
            call()
            device.sync()
        first_call_s = time.perf_counter() - start
        compile_s = first_call_s if device.torch_device != "cpu" else None
        phases: dict[str, Any] = {"first_call_s": first_call_s, "interpreted": True} \
            if compile_s is None else {"first_call_s": first_call_s,
                                       "device_cache_hit": compiles.cache_hit}
        on_compiled(compile_s)
        phase = "run"
        checked = time.perf_counter()
        err = _output_error(kernel, tensors, expected)
        phases["check_s"] = time.perf_counter() - checked
        tol = kernel.tolerance.get(request.dtype, 1e-2)
        if not err <= tol:
            return Outcome(Measurement.failure(
                TrialStatus.WRONG_RESULT,
                f"relative Frobenius error {err:.3e} exceeds the {request.dtype} tolerance "
                f"{tol:.1e}", max_rel_error=err if err != float("inf") else None,
                compile_s=compile_s, phases=phases, **base, **counts))
        provenance = {**device.describe(), **device.trial_provenance()}
        timed = time.perf_counter()
        samples = device.time(call, request.timing)
        phases["timing_s"] = time.perf_counter() - timed
        stats = summarise(samples)
        provenance.update({f"after_{k}": v for k, v in device.trial_provenance().items()})
        return Outcome(Measurement(
            status=str(TrialStatus.OK), median_ms=stats.median_ms, p20_ms=stats.p20_ms,
            p80_ms=stats.p80_ms, min_ms=stats.min_ms, n=stats.n, cv=stats.cv,
            compile_s=compile_s, max_rel_error=err, provenance=provenance, phases=phases,
            **base, **counts))
    except ConfigRejected as exc:
        if phase == "compile":
            on_compiled(None)
        return Outcome(Measurement.failure(TrialStatus.INVALID, str(exc), **base, **counts))
    except Exception as exc:
        if phase == "compile":
            on_compiled(None)
        limit = explain_interpreter_limit(exc) if device.torch_device == "cpu" else None
        if limit is not None:
            return Outcome(Measurement.failure(TrialStatus.COMPILE_ERROR, f"[{phase}] {limit}",
                                               **base, **counts))
        status = classify(exc)
        fatal = device.is_fatal(exc)
        return Outcome(Measurement.failure(status, f"[{phase}] {_error_text(exc)}",
                                           **base, **counts), fatal=fatal)


def run_confirmation(device: BenchDevice, request: BenchmarkRequest,
                     roots: tuple[Path, ...]) -> dict[str, Any]:
    """Re-time ``request.finalists`` interleaved on one set of inputs.

    Returns ``{"timings": [{"trial_id", "median_ms", "n"}, …]}``, or ``{"error": …}`` when a
    finalist no longer runs (it passed its correctness check when it was measured).
    """
    finalists = request.finalists or []
    try:
        kernel = load_kernel(request.kernel, roots)
        tensors = kernel.make_inputs(request.problem, request.dtype, request.seed,
                                     device.torch_device)
        calls: list[Callable[[], object]] = []
        for finalist in finalists:
            call = functools.partial(kernel.launch, tensors, request.problem,
                                     dict(finalist["params"]))
            call()  # compiled (cached by Triton) and warm
            calls.append(call)
        device.sync()
        samples = device.time_interleaved(calls, request.timing)
    except Exception as exc:
        return {"error": _error_text(exc), "fatal": device.is_fatal(exc)}
    timings = []
    for finalist, times in zip(finalists, samples, strict=True):
        stats = summarise(times)
        timings.append({"trial_id": int(finalist["trial_id"]), "median_ms": stats.median_ms,
                        "n": stats.n})
    return {"timings": timings}
