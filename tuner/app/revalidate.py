"""``tuner revalidate``: re-measure stored best configs and report regressions beyond noise.

After a Triton, driver or hardware change the stored winners may no longer be as fast. Each
selected best config (those this machine can run: ``cpu`` rows on the interpreter, GPU rows on
``cuda`` when the local GPU is of their kind) is measured again in an isolated bench process
and compared with its stored time. A change counts only beyond the noise:
``max(threshold, 3 · cv)`` of the new measurement (cv = its coefficient of variation).
Predicted (``model:``) and recorded (``replay:``) rows have nothing to re-measure. A row is
measured with the kernel its job tuned: a built-in by name, a file kernel (``path.py:NAME``)
from the file its fingerprint recorded, so it works from any folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from dataclasses import dataclass
from typing import Any

import sqlalchemy.orm as so

from db import repository as repo
from tuner.core.devices.nvidia_smi import local_gpu_kinds
from tuner.core.settings import Settings
from tuner.core.target import as_target
from tuner.core.types import BenchmarkRequest
from tuner.kernels import resolve_kernel
from tuner.kernels.names import is_file_ref
from tuner.measure.backends.base import Backend
from tuner.measure.backends.registry import make_backend
from tuner.views.jobs import read_rows


@dataclass
class Revalidation:
    """One stored best config measured again (times in ms)."""

    kernel: str
    problem_key: str
    dtype: str
    device_kind: str
    stored_ms: float
    new_ms: float | None
    change: float | None  # new / stored − 1
    noise: float | None
    verdict: str  # same | regressed | improved | <failure status> | skipped
    error: str | None = None  # why it could not be measured (first line)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def local_backend(device_kind: str) -> str | None:
    """The backend that can re-measure a row of ``device_kind`` here, if any."""
    if device_kind == "cpu":
        return "interpret"
    return "cuda" if device_kind in local_gpu_kinds() else None


def _kernel_ref(session: so.Session, row: Any) -> str:
    """What the bench loads for ``row``: its job's kernel reference, a file kernel's path made
    absolute from the fingerprint (the job may have been submitted from another folder)."""
    job = repo.get_job(session, row.job_id)
    ref = str(job.spec.get("kernel", row.kernel)) if job is not None else row.kernel
    kernel_file = (row.fingerprint or {}).get("kernel_file")
    if is_file_ref(ref) and kernel_file:
        return f"{kernel_file}:{ref.rsplit(':', 1)[1]}"
    return ref


def revalidate(settings: Settings, kernel: str | None = None, device_kind: str | None = None,
               threshold: float = 0.05,
               on_result: Callable[[int, int, Revalidation], None] | None = None,
               ) -> list[Revalidation]:
    """Measure every selected stored best config again (see the module docstring).
    ``kernel``: a stored kernel name, or a ``path.py:NAME`` reference (described in a
    sandboxed child for its name). ``on_result(done, total, result)`` hears each row as it
    is measured (progress)."""
    if kernel is not None and is_file_ref(kernel):
        kernel = resolve_kernel(kernel, "interpret", settings.kernel_roots, isolated=True).name

    def read(session: so.Session) -> list[tuple[Any, str]]:
        found = repo.best_configs(session, kernel=kernel, device_kind=device_kind)
        return [(row, _kernel_ref(session, row)) for row in found]

    pairs = read_rows(settings, read)  # DatabaseError when there is none
    report = on_result or (lambda done, total, result: None)
    processes: dict[str, Backend] = {}
    results: list[Revalidation] = []

    def add(result: Revalidation) -> None:
        results.append(result)
        report(len(results), len(pairs), result)

    try:
        for row, ref in pairs:
            backend = None if not as_target(row.backend).has_noise else \
                local_backend(row.device_kind)
            base: dict[str, Any] = dict(kernel=row.kernel, problem_key=row.problem_key,
                                        dtype=row.dtype, device_kind=row.device_kind,
                                        stored_ms=row.median_ms)
            if backend is None:
                add(Revalidation(**base, new_ms=None, change=None, noise=None,
                                            verdict="skipped"))
                continue
            if backend not in processes:
                processes[backend] = make_backend(backend, cache_dir=settings.cache_dir,
                                                  kernel_roots=settings.kernel_roots)
            m = processes[backend].run(BenchmarkRequest(
                trial_id=row.trial_id, attempt=1, job_id=row.job_id, kernel=ref,
                problem=dict(row.problem), dtype=row.dtype, params=dict(row.config),
                backend=backend, device_kind=row.device_kind))
            if m.status != "ok" or m.median_ms is None:
                first = next((line for line in (m.error or "").splitlines() if line), None)
                add(Revalidation(**base, new_ms=None, change=None, noise=None,
                                            verdict=m.status, error=first))
                continue
            noise = max(threshold, 3 * (m.cv or 0.0))
            change = m.median_ms / row.median_ms - 1
            verdict = "regressed" if change > noise else \
                "improved" if change < -noise / (1 + noise) else "same"
            add(Revalidation(**base, new_ms=m.median_ms, change=change,
                                        noise=noise, verdict=verdict))
    finally:
        for proc in processes.values():
            proc.close()
    return results
