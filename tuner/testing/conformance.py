"""One contract per interface (DESIGN.md decision 9), as checks a test suite runs against each
implementation.

Backends (runners: ``interpret``, ``replay:<file>``, ``model:<gpu kind>``, ``standin:<gpu
kind>`` alone and behind a compile pool, the fake GPU of ``tuner.testing.fake_cuda`` and, on a
GPU machine, ``cuda``) answer a valid config with a timed, scorable measurement and a bad one
with a failure status, never an exception; they keep serving after a failure; they re-time
finalists interleaved (``RUNNER_CHECKS``). Builders (one compile process for a GPU kind, a
compile pool) compile a valid config and report its registers and shared memory, and answer a
bad one with a failure status (``BUILDER_CHECKS``). Nothing is asked of an implementation that
its interface does not declare, so every check asserts something wherever it runs. Each check
raises ``AssertionError`` with what went wrong.

    case = matmul_case("interpret")
    backend = make_backend(case.backend, cache_dir=…, kernel_roots=…); backend.start()
    for check in RUNNER_CHECKS:
        check(backend, case)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from tuner.core.roofline import score
from tuner.core.target import Evidence
from tuner.core.target import as_target
from tuner.core.types import BenchmarkRequest
from tuner.core.types import TimingSettings
from tuner.measure.backends.base import Backend
from tuner.measure.backends.base import Builder

#: Two valid 64×64×64 matmul configs and one Triton rejects (BLOCK_K not a power of two).
MATMUL_OK = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4, "num_warps": 4,
             "num_stages": 2}
MATMUL_OK_ALT = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4,
                 "num_stages": 2}
MATMUL_BAD = {**MATMUL_OK, "BLOCK_K": 48}
#: A config the analytic model rejects: its pipeline needs far more shared memory than an SM has.
MATMUL_TOO_BIG = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 256, "GROUP_M": 1,
                  "num_warps": 8, "num_stages": 5}
#: Short timing budgets: the checks test the contract, not the speed.
QUICK = TimingSettings(warmup_ms=0, rep_ms=10, min_reps=3, max_reps=10)
BACKEND_KINDS = ("interpret", "cuda", "replay", "model", "standin")


@dataclass(frozen=True)
class BackendCase:
    """What to ask a backend or a builder: a problem, two valid configs, a bad one and the
    status it must get."""

    backend: str
    kernel: str
    problem: dict[str, int]
    dtype: str
    good: dict[str, Any]
    good_alt: dict[str, Any]
    bad: dict[str, Any]
    bad_statuses: tuple[str, ...]
    device_kind: str = "any"
    timing: TimingSettings = field(default=QUICK)


def matmul_case(backend: str) -> BackendCase:
    """The fp16 matmul at 64³ on ``backend`` (``interpret``, ``cuda``, ``model:<kind>``,
    ``standin:<kind>``)."""
    problem = {"M": 64, "N": 64, "K": 64}
    target = as_target(backend)
    kind = target.gpu_kind or "any"
    if target.evidence is Evidence.PREDICTED:
        return BackendCase(backend, "matmul", problem, "fp16", MATMUL_OK, MATMUL_OK_ALT,
                           MATMUL_TOO_BIG, ("out_of_resources",), device_kind=kind)
    return BackendCase(backend, "matmul", problem, "fp16", MATMUL_OK, MATMUL_OK_ALT,
                       MATMUL_BAD, ("compile_error",), device_kind=kind)


def builder_case(kind: str) -> BackendCase:
    """The fp16 matmul at 64³ compiled for GPU ``kind`` (a static check of a ``cuda`` job)."""
    return BackendCase("cuda", "matmul", {"M": 64, "N": 64, "K": 64}, "fp16", MATMUL_OK,
                       MATMUL_OK_ALT, MATMUL_BAD, ("compile_error",), device_kind=kind)


def replay_case(path: Path) -> BackendCase:
    """A recording with a compile failure (``CompilationFailedConfig``) in it."""
    from search_spaces.recorded import load_recording

    rec = load_recording(path)
    ok = [e for e in rec.entries.values() if not isinstance(e["time"], str)]
    bad = next(e for e in rec.entries.values() if e["time"] == "CompilationFailedConfig")
    return BackendCase(f"replay:{path}", "replay", rec.problem(), "fp32",
                       {k: ok[0][k] for k in rec.keys}, {k: ok[1][k] for k in rec.keys},
                       {k: bad[k] for k in rec.keys}, ("compile_error",))


def request(case: BackendCase, params: dict[str, Any], trial_id: int = 1,
            **extra: Any) -> BenchmarkRequest:
    """A request of ``case`` for ``params`` (``extra``: other fields, e.g. ``mode``)."""
    return BenchmarkRequest(
        trial_id=trial_id, attempt=1, job_id=1, kernel=case.kernel, problem=dict(case.problem),
        dtype=case.dtype, params=dict(params), backend=case.backend,
        device_kind=case.device_kind, timing=case.timing, compile_timeout_s=300,
        run_timeout_s=300, **extra)


def check_describes_its_device(backend: Backend, case: BackendCase) -> None:
    info = backend.describe()
    assert info.get("device_kind"), f"describe() names no device kind: {info}"
    assert info.get("backend") in BACKEND_KINDS, f"describe() names no backend kind: {info}"


def check_measures_a_valid_config(backend: Backend, case: BackendCase) -> None:
    m = backend.run(request(case, case.good))
    assert m.status == "ok", f"a valid config failed: {m.status}: {m.error}"
    assert m.median_ms is not None and m.median_ms > 0 and m.n >= 1
    assert m.p20_ms is not None and m.p80_ms is not None and m.min_ms is not None
    assert m.min_ms <= m.p20_ms <= m.median_ms <= m.p80_ms, \
        f"statistics out of order: min {m.min_ms} p20 {m.p20_ms} median {m.median_ms} " \
        f"p80 {m.p80_ms}"
    assert m.cv is not None and m.cv >= 0 and math.isfinite(m.cv)
    info = backend.describe()
    assert m.device_kind == info["device_kind"], (m.device_kind, info["device_kind"])
    assert m.provenance.get("backend") == info["backend"], (m.provenance, info)
    s = score(m)
    assert s is not None, "an ok measurement must be scorable"
    assert 0 < s.fraction <= 1.0 + 1e-9, f"roofline fraction {s.fraction}"


def check_bad_configs_are_statuses(backend: Backend, case: BackendCase) -> None:
    bad = backend.run(request(case, case.bad))
    assert bad.status in case.bad_statuses, f"{bad.status}: {bad.error}"
    broken = backend.run(request(case, {"nonsense": 1}, trial_id=2))
    assert broken.status in ("compile_error", "crashed") and broken.error, broken
    again = backend.run(request(case, case.good, trial_id=3))
    assert again.status == "ok", f"the backend stopped serving after failures: {again.error}"


def check_retimes_finalists(backend: Backend, case: BackendCase) -> None:
    finalists = [{"trial_id": 11, "params": case.good}, {"trial_id": 12, "params": case.good_alt}]
    outcome = backend.confirm(request(case, case.good, mode="confirm", finalists=finalists,
                                      problem_id=1))
    assert outcome.ok, f"confirmation failed: {outcome.error}"
    assert [t.trial_id for t in outcome.timings] == [11, 12], outcome
    assert all(t.median_ms > 0 and t.n >= 1 for t in outcome.timings), outcome


def check_static_checks(builder: Builder, case: BackendCase) -> None:
    good = builder.check(request(case, case.good, mode="check"))
    assert good.launchable, f"a valid config failed its static check: {good}"
    assert good.regs and good.regs > 0 and good.smem_bytes is not None, good
    assert good.smem_limit and good.smem_bytes <= good.smem_limit, good
    assert good.target, f"a static check names no compile target: {good}"
    bad = builder.check(request(case, case.bad, mode="check", trial_id=2))
    assert bad.status in case.bad_statuses and bad.error, bad
    assert builder.check(request(case, case.good_alt, mode="check", trial_id=3)).launchable


RUNNER_CHECKS: tuple[Callable[[Backend, BackendCase], None], ...] = (
    check_describes_its_device, check_measures_a_valid_config, check_bad_configs_are_statuses,
    check_retimes_finalists)
BUILDER_CHECKS: tuple[Callable[[Builder, BackendCase], None], ...] = (check_static_checks,)
