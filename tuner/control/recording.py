"""What the service writes when something was measured: a scored trial result, and a best
config offered to the production table.

``record_measurement`` scores the measurement against its roofline and stores it with the
compare-and-set of ``db.repository.store_result``: it returns False, and changes nothing, when
the trial has moved on (a duplicate delivery, a cancelled job, an attempt the reconciler
replaced). ``offer_trial`` offers a trial as the best config of its (kernel, problem, dtype,
device kind) with the fingerprint of everything that can change the answer; predictions
(``model:``) and simulated devices (``standin:``) are never offered.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy.orm as so

from db import repository as repo
from db.models import Problem
from db.models import Trial
from tuner.core.roofline import score
from tuner.core.types import BenchmarkRequest
from tuner.core.types import JobSpec
from tuner.core.types import Measurement
from tuner.core.types import TrialStatus
from tuner.core.types import problem_hash
from tuner.kernels.names import is_file_ref

#: A fraction of the roofline above this is impossible: the kernel's FLOP or byte count is wrong
#: (or forged). Such a trial is kept, flagged ``implausible``, and never offered.
MAX_FRACTION = 1.10
#: Score bases whose trials are never offered as best configs.
UNOFFERED_BASES = ("predicted", "implausible", "unscored")


def _score(m: Measurement) -> Any:
    """``score(m)``, or None when the kernel's counts make no sense (negative, infinite)."""
    counts = [c for c in (m.flops, m.min_bytes, m.exps) if c is not None]
    if any(not math.isfinite(c) or c < 0 for c in counts):
        return None
    try:
        s = score(m)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return s if s is not None and math.isfinite(s.fraction) else None


def result_values(m: Measurement) -> dict[str, Any]:
    """Column values of ``tuner_trials`` for a measurement (scored when ``ok``)."""
    values: dict[str, Any] = {
        "status": m.status,
        "median_ms": m.median_ms, "p20_ms": m.p20_ms, "p80_ms": m.p80_ms, "min_ms": m.min_ms,
        "n_samples": m.n or None, "cv": m.cv, "compile_s": m.compile_s,
        "max_rel_error": m.max_rel_error, "error": m.error, "device_kind": m.device_kind,
        "provenance": {**m.provenance, "ceilings": m.ceilings} if m.ceilings else m.provenance,
        "phases": m.phases or None,
    }
    s = _score(m) if m.status == TrialStatus.OK else None
    if s is not None:
        basis = "implausible" if s.fraction > MAX_FRACTION and s.basis != "predicted" \
            else s.basis
        values.update(roof_ms=s.roof_ms, fraction=s.fraction,
                      fraction_measured=s.fraction_measured, score_basis=basis, bound=s.bound,
                      tflops=s.tflops, gbps=s.gbps, intensity=s.intensity)
    elif m.status == TrialStatus.OK:
        values.update(fraction=None, score_basis="unscored")
    return values


def record_measurement(session: so.Session, request: BenchmarkRequest,
                       m: Measurement) -> bool:
    """Store ``m`` for ``request``'s trial and attempt; True if this call stored it."""
    return repo.store_result(session, request.trial_id, request.attempt, result_values(m))


def fingerprint(job_kernel_hash: str, space_hash: str, t: Trial,
                kernel_ref: str | None = None) -> dict[str, Any]:
    """Everything that can change the answer (DESIGN.md decision 10). ``kernel_ref``: the job's
    kernel; for ``path.py:NAME`` the file's absolute path is kept (``kernel_file``), so that a
    lookup can tell when a bring-your-own kernel's file changed."""
    prov = t.provenance or {}
    kernel_file = None
    if kernel_ref is not None and is_file_ref(kernel_ref):
        kernel_file = str(Path(kernel_ref.rsplit(":", 1)[0]).expanduser().resolve())
    return {
        "kernel_source_hash": job_kernel_hash, "space_hash": space_hash,
        "kernel_file": kernel_file,
        "device_kind": t.device_kind, "device_name": prov.get("device_name"),
        "compute_capability": prov.get("compute_capability"), "triton": prov.get("triton"),
        "torch": prov.get("torch"), "cuda": prov.get("cuda"), "driver": prov.get("driver"),
        "backend": prov.get("backend"),
    }


@dataclass(frozen=True)
class JobIdentity:
    """What the writers of a job's results know about it: its id, spec, kernel name and the
    hashes of its kernel source and search space (from its row in ``tuner_jobs``)."""

    job_id: int
    spec: JobSpec
    kernel_name: str
    source_hash: str
    space_hash: str
    identity: str = "builtin"
    #: ``valid(config, problem)``: the kernel's space accepts the config for that problem on
    #: the job's device (built-ins: checked on every offer, so no served config can fail to
    #: launch); None: not checked here.
    valid: Callable[[Mapping[str, Any], Mapping[str, int]], bool] | None = None

    def request(self, *, trial_id: int, attempt: int, problem_id: int,
                problem: dict[str, int], params: dict[str, Any],
                **overrides: Any) -> BenchmarkRequest:
        """A request of this job for one config of one problem, with the job's kernel, dtype,
        backend, device kind, seed, timing and timeouts (``overrides``: other fields, e.g.
        ``mode``)."""
        spec = self.spec
        fields: dict[str, Any] = dict(
            trial_id=trial_id, attempt=attempt, job_id=self.job_id, kernel=spec.kernel,
            problem=dict(problem), dtype=spec.dtype, params=dict(params), backend=spec.backend,
            device_kind=spec.device_kind, seed=spec.seed if spec.seed is not None else 0,
            timing=spec.timing, compile_timeout_s=spec.compile_timeout_s,
            run_timeout_s=spec.run_timeout_s, kernel_hash=self.source_hash,
            problem_id=problem_id)
        return BenchmarkRequest(**{**fields, **overrides})


def offer_trial(session: so.Session, job: JobIdentity, problem: Problem, t: Trial,
                fraction: float, median_ms: float, *, replace_from_job: bool = False) -> bool:
    """Offer trial ``t`` of ``problem`` (at ``fraction``, ``median_ms``) as the best config of
    its key; True if it became it. A prediction (``model:`` backend, or any trial scored as
    one, such as a simulated ``standin:`` device's) is never offered.
    ``replace_from_job``: also replace the row this job stored (a confirmation re-timing
    overrides the search's own, noisier figures)."""
    if not job.spec.target.offers_best or t.score_basis in UNOFFERED_BASES:
        return False
    if not math.isfinite(fraction) or fraction > MAX_FRACTION or median_ms <= 0:
        return False  # above its roofline: a wrong FLOP or byte count, never a winner
    if job.valid is not None and not job.valid(t.config, problem.problem):
        return False
    return repo.offer_best(
        session, kernel=job.kernel_name, kernel_identity=job.identity, problem=problem.problem,
        problem_hash=problem_hash(problem.problem), problem_key=problem.problem_key,
        dtype=job.spec.dtype, device_kind=t.device_kind or job.spec.device_kind,
        backend=job.spec.backend, config=t.config, fraction=fraction, median_ms=median_ms,
        trial_id=t.id, job_id=job.job_id,
        fingerprint=fingerprint(job.source_hash, job.space_hash, t, job.spec.kernel),
        replace_from_job=replace_from_job)
