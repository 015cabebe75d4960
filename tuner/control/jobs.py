"""Validate a job spec and create the job: rows for the job and its problems, one study each.

``validate`` finds every user mistake before anything is written (unknown dtype, malformed or
non-positive sizes, a space with no valid config for a problem, a bad budget). ``create_job``
is idempotent under ``JobSpec.idempotency_key``: submitting the same key twice returns the same
job and creates nothing new.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy.orm as so

from db import repository as repo
from db.models import Job
from search_spaces import Context
from tuner.control.searches import SEARCHES
from tuner.core.devices.datasheets import CPU_KIND
from tuner.core.devices.datasheets import DEVICES
from tuner.core.devices.datasheets import target_limits
from tuner.core.limits import spec_errors
from tuner.core.target import BadTarget
from tuner.core.types import JobSpec
from tuner.core.types import problem_key
from tuner.kernels import KernelSpec
from tuner.optuna.storage import create_study_record
from tuner.optuna.storage import storage_for


class JobError(ValueError):
    """A job that cannot be created; the message is meant for the user."""


def problem_context(kernel: KernelSpec, spec: JobSpec, problem: dict[str, int]) -> Context:
    return Context(problem=problem, dtype=spec.dtype, target=target_limits(spec.device_kind))


def study_name(kernel: str, problem: dict[str, int], dtype: str, device_kind: str,
               job_id: int) -> str:
    """Readable study name: ``matmul/M512-N512-K512/bf16/h100-sxm/job-17``."""
    return f"{kernel}/{problem_key(problem)}/{dtype}/{device_kind}/job-{job_id}"


def validate(spec: JobSpec, kernel: KernelSpec) -> list[str]:
    """Every reason ``spec`` cannot run (empty when it can)."""
    errors = list(kernel.dtype_errors(spec.dtype))
    if not spec.problems:
        example = kernel.example_problem or {d: 512 for d in kernel.dims}
        errors.append("no problem given (e.g. --shape " + ",".join(
            f"{d}={v}" for d, v in example.items()) + ")")
    if spec.sampler not in SEARCHES:
        errors.append(f"unknown sampler {spec.sampler!r} (choose from "
                      f"{', '.join(SEARCHES.names())})")
    if spec.static_check is not None and spec.static_check not in DEVICES:
        errors.append(f"cannot statically check for {spec.static_check!r}: not a GPU kind of "
                      f"the device table ({', '.join(DEVICES)})")
    errors.extend(spec_errors(spec))
    try:
        interpreter = spec.target.is_interpreter
    except BadTarget:  # reported by ``spec_errors``
        interpreter = False
    if interpreter and spec.device_kind != CPU_KIND:
        errors.append("the interpret backend runs on the host CPU (device kind 'cpu')")
    if errors:
        return errors
    for problem in spec.problems:
        problem_errors = kernel.problem_errors(problem)
        if problem_errors:
            errors.extend(problem_errors)
            continue
        ctx = problem_context(kernel, spec, kernel.canonical_problem(problem))
        if kernel.space.default_config(ctx) is None:
            errors.append(f"the search space of {kernel.name} has no valid config for "
                          f"{problem_key(problem)} {spec.dtype} on {spec.device_kind}")
    return errors


@dataclass(frozen=True)
class CreatedJob:
    job_id: int
    existing: bool
    study_names: Sequence[str]


def create_job(sessions: so.sessionmaker[so.Session], db_url: str, spec: JobSpec,
               kernel: KernelSpec) -> CreatedJob:
    """Create the job, its problems and their studies; raises ``JobError`` for bad input."""
    errors = validate(spec, kernel)
    if errors:
        raise JobError("; ".join(errors))
    problems = [kernel.canonical_problem(p) for p in spec.problems]
    with sessions.begin() as session:
        if spec.idempotency_key:
            existing = repo.job_by_idempotency_key(session, spec.idempotency_key)
            if existing is not None:
                if existing.spec != spec.to_json():
                    raise JobError(f"idempotency key {spec.idempotency_key!r} was already used "
                                   f"by job {existing.id} with a different spec")
                names = [p.study_name for p in repo.problems_of(session, existing.id)]
                return CreatedJob(existing.id, True, names)
        job = repo.add_job(
            session, kernel=kernel.name, kernel_source_hash=kernel.source_hash(),
            kernel_identity=kernel_identity_of(kernel, spec.kernel),
            space_hash=kernel.space.space_hash(), dtype=spec.dtype,
            device_kind=spec.device_kind, backend=spec.backend, sampler=spec.sampler,
            seed=spec.seed, spec=spec.to_json(), status="pending",
            idempotency_key=spec.idempotency_key)
        names = []
        for position, problem in enumerate(problems):
            name = study_name(kernel.name, problem, spec.dtype, spec.device_kind, job.id)
            repo.add_problem(session, job_id=job.id, position=position, problem=problem,
                             problem_key=problem_key(problem), study_name=name)
            names.append(name)
        job_id = job.id
        attrs = [study_attrs(job, problem) for problem in problems]
    for name, attr in zip(names, attrs, strict=True):
        create_study_record(db_url, name, attr)
    return CreatedJob(job_id, False, names)


def study_attrs(job: Job, problem: dict[str, int]) -> dict[str, object]:
    """What a problem's Optuna study says about itself (shown by optuna-dashboard)."""
    return {
        "job_id": job.id, "kernel": job.kernel, "problem": problem_key(problem),
        "dtype": job.dtype, "device_kind": job.device_kind, "backend": job.backend,
        "objective": "roofline fraction (datasheet; measured ceilings on the CPU)",
        "space_hash": job.space_hash,
    }


def ensure_studies(sessions: so.sessionmaker[so.Session], db_url: str, job_id: int) -> int:
    """Create the Optuna studies of ``job_id`` that do not exist; returns how many. The job
    and its problems are committed before their studies are created (Optuna writes through
    its own storage), so a submit killed in between leaves a job without them: the scheduler
    that takes the job calls this first. Idempotent, and safe beside a submit creating them."""
    storage = storage_for(db_url)
    with sessions() as session:
        job = repo.get_job(session, job_id)
        if job is None:
            return 0
        wanted = [(p.study_name, study_attrs(job, dict(p.problem)))
                  for p in repo.problems_of(session, job_id)]
    created = 0
    for name, attrs in wanted:
        try:
            storage.get_study_id_from_name(name)
        except KeyError:
            create_study_record(db_url, name, attrs)
            created += 1
    return created


def kernel_identity_of(kernel: KernelSpec, ref: str) -> str:
    """The identity a job's results are stored under (``tuner.kernels.identity``): what the
    registry found, and never ``builtin`` for a file."""
    from tuner.kernels.identity import BUILTIN
    from tuner.kernels.identity import file_identity
    from tuner.kernels.names import is_file_ref

    if is_file_ref(ref):
        said = kernel.identity
        return said if said and said != BUILTIN else file_identity(kernel.source_hash())
    return BUILTIN
