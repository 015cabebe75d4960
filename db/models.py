"""SQLAlchemy 2.0 typed models of the service's own tables (prefix ``tuner_``).

Alembic owns these tables (``db/migrations``, version table ``tuner_alembic_version``); Optuna
owns its own tables in the same database. Models hold data only: no queue, no Optuna, no I/O.

Time columns are UTC. Durations: ``*_ms`` milliseconds, ``*_s`` seconds.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from typing import ClassVar

import sqlalchemy as sa
import sqlalchemy.orm as so


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class Base(so.DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: sa.JSON,
                                                     list[Any]: sa.JSON}


class Job(Base):
    """A tuning job as submitted; ``status``: pending, running, completed, failed, cancelled."""

    __tablename__ = "tuner_jobs"

    id: so.Mapped[int] = so.mapped_column(primary_key=True)
    kernel: so.Mapped[str] = so.mapped_column(sa.String(512))
    kernel_source_hash: so.Mapped[str] = so.mapped_column(sa.String(64))
    #: Whose code it is (``tuner.kernels.identity``): ``builtin``, ``jit:…`` or ``file:…``.
    kernel_identity: so.Mapped[str | None] = so.mapped_column(sa.String(128))
    space_hash: so.Mapped[str] = so.mapped_column(sa.String(64))
    dtype: so.Mapped[str] = so.mapped_column(sa.String(16))
    device_kind: so.Mapped[str] = so.mapped_column(sa.String(64))
    backend: so.Mapped[str] = so.mapped_column(sa.String(1024))
    sampler: so.Mapped[str] = so.mapped_column(sa.String(32))
    seed: so.Mapped[int | None]
    spec: so.Mapped[dict[str, Any]]
    status: so.Mapped[str] = so.mapped_column(sa.String(16), default="pending", index=True)
    idempotency_key: so.Mapped[str | None] = so.mapped_column(sa.String(128), unique=True)
    error: so.Mapped[str | None] = so.mapped_column(sa.Text)
    driver_owner: so.Mapped[str | None] = so.mapped_column(sa.String(128))
    driver_lease_until: so.Mapped[dt.datetime | None]
    created_at: so.Mapped[dt.datetime] = so.mapped_column(default=utcnow)
    started_at: so.Mapped[dt.datetime | None]
    finished_at: so.Mapped[dt.datetime | None]

    problems: so.Mapped[list[Problem]] = so.relationship(
        back_populates="job", order_by="Problem.position")


class Problem(Base):
    """One (job, problem shape): one Optuna study. ``status``: pending, running, done."""

    __tablename__ = "tuner_problems"
    __table_args__ = (sa.UniqueConstraint("job_id", "position"),)

    id: so.Mapped[int] = so.mapped_column(primary_key=True)
    job_id: so.Mapped[int] = so.mapped_column(sa.ForeignKey("tuner_jobs.id"), index=True)
    position: so.Mapped[int]
    problem: so.Mapped[dict[str, Any]]
    problem_key: so.Mapped[str] = so.mapped_column(sa.String(256))
    study_name: so.Mapped[str] = so.mapped_column(sa.String(512), unique=True)
    status: so.Mapped[str] = so.mapped_column(sa.String(16), default="pending")
    stop_reason: so.Mapped[str | None] = so.mapped_column(sa.String(256))
    measured: so.Mapped[int] = so.mapped_column(default=0)
    best_trial_id: so.Mapped[int | None]
    best_fraction: so.Mapped[float | None]
    last_improvement: so.Mapped[int] = so.mapped_column(default=0)
    # what the search started from and how far it trusts it (tuner.control.priors); None: cold
    prior: so.Mapped[dict[str, Any] | None] = so.mapped_column(sa.JSON)
    # confirmation: the top configs re-timed interleaved before the winner is declared
    confirm_status: so.Mapped[str | None] = so.mapped_column(sa.String(16))
    confirm_attempt: so.Mapped[int] = so.mapped_column(default=0, server_default="0")
    confirm_started_at: so.Mapped[dt.datetime | None]
    started_at: so.Mapped[dt.datetime | None]
    finished_at: so.Mapped[dt.datetime | None]

    job: so.Mapped[Job] = so.relationship(back_populates="problems")


class Trial(Base):
    """One proposed config and, once final, its measurement and score.

    ``number`` is the Optuna trial number in the problem's study. A result is written only by a
    compare-and-set on (``id``, ``attempt``) while the trial is queued or running, so a duplicate
    delivery cannot store a second measurement. ``told`` records that Optuna has the outcome.
    ``duplicate_of`` marks a repeated proposal answered from an earlier trial (not measured).
    """

    __tablename__ = "tuner_trials"
    __table_args__ = (
        sa.UniqueConstraint("problem_id", "number"),
        sa.Index("ix_tuner_trials_problem_status", "problem_id", "status"),
    )

    id: so.Mapped[int] = so.mapped_column(primary_key=True)
    job_id: so.Mapped[int] = so.mapped_column(sa.ForeignKey("tuner_jobs.id"), index=True)
    problem_id: so.Mapped[int] = so.mapped_column(sa.ForeignKey("tuner_problems.id"))
    number: so.Mapped[int]
    optuna_trial_id: so.Mapped[int | None]
    config: so.Mapped[dict[str, Any]]
    config_hash: so.Mapped[str] = so.mapped_column(sa.String(64))
    status: so.Mapped[str] = so.mapped_column(sa.String(24), default="queued")
    attempt: so.Mapped[int] = so.mapped_column(default=1)
    lease_owner: so.Mapped[str | None] = so.mapped_column(sa.String(128))
    lease_until: so.Mapped[dt.datetime | None]
    duplicate_of: so.Mapped[int | None]
    told: so.Mapped[bool] = so.mapped_column(default=False)
    told_at: so.Mapped[dt.datetime | None]
    queued_at: so.Mapped[dt.datetime] = so.mapped_column(default=utcnow)
    published_at: so.Mapped[dt.datetime | None]
    started_at: so.Mapped[dt.datetime | None]
    finished_at: so.Mapped[dt.datetime | None]
    # measurement
    median_ms: so.Mapped[float | None]
    p20_ms: so.Mapped[float | None]
    p80_ms: so.Mapped[float | None]
    min_ms: so.Mapped[float | None]
    n_samples: so.Mapped[int | None]
    cv: so.Mapped[float | None]
    compile_s: so.Mapped[float | None]
    max_rel_error: so.Mapped[float | None]
    error: so.Mapped[str | None] = so.mapped_column(sa.Text)
    device_kind: so.Mapped[str | None] = so.mapped_column(sa.String(64))
    provenance: so.Mapped[dict[str, Any] | None] = so.mapped_column(sa.JSON)
    # score
    roof_ms: so.Mapped[float | None]
    fraction: so.Mapped[float | None]
    fraction_measured: so.Mapped[float | None]
    score_basis: so.Mapped[str | None] = so.mapped_column(sa.String(24))
    bound: so.Mapped[str | None] = so.mapped_column(sa.String(24))
    tflops: so.Mapped[float | None]
    gbps: so.Mapped[float | None]
    intensity: so.Mapped[float | None]
    # static check (compiled for the target without a GPU)
    static_status: so.Mapped[str | None] = so.mapped_column(sa.String(24))
    static_regs: so.Mapped[int | None]
    static_spill_bytes: so.Mapped[int | None]
    static_smem_bytes: so.Mapped[int | None]
    # confirmation re-measurement (finalists only), ms
    confirm_ms: so.Mapped[float | None]
    confirm_n: so.Mapped[int | None]
    #: Where the trial's time went (``Measurement.phases``: compile, cache hit, device wait,
    #: check, timing, device start/end); ``tuner.core.device_time`` reads it.
    phases: so.Mapped[dict[str, Any] | None] = so.mapped_column(sa.JSON)


class StaticCheck(Base):
    """Cache of static checks, keyed by everything that changes the compiled code."""

    __tablename__ = "tuner_static_checks"

    key: so.Mapped[str] = so.mapped_column(sa.String(64), primary_key=True)
    target: so.Mapped[str] = so.mapped_column(sa.String(32))
    result: so.Mapped[dict[str, Any]]
    created_at: so.Mapped[dt.datetime] = so.mapped_column(default=utcnow)


class BestConfig(Base):
    """The best measured config per (kernel, identity, problem, dtype, device kind), across
    jobs. The identity (``tuner.kernels.identity``) keeps a file kernel that calls itself
    ``matmul`` beside the built-in, never over it.

    ``fingerprint`` names everything that can change the answer (kernel source hash, space hash,
    Triton/torch/CUDA versions, GPU), so a lookup can flag an answer as stale.
    """

    __tablename__ = "tuner_best_configs"
    __table_args__ = (sa.UniqueConstraint("kernel", "kernel_identity", "problem_hash", "dtype",
                                          "device_kind", name="uq_best_config_key"),)

    id: so.Mapped[int] = so.mapped_column(primary_key=True)
    kernel: so.Mapped[str] = so.mapped_column(sa.String(512))
    kernel_identity: so.Mapped[str] = so.mapped_column(sa.String(128), server_default="builtin")
    problem: so.Mapped[dict[str, Any]]
    problem_hash: so.Mapped[str] = so.mapped_column(sa.String(64))
    problem_key: so.Mapped[str] = so.mapped_column(sa.String(256))
    dtype: so.Mapped[str] = so.mapped_column(sa.String(16))
    device_kind: so.Mapped[str] = so.mapped_column(sa.String(64))
    backend: so.Mapped[str] = so.mapped_column(sa.String(1024))
    config: so.Mapped[dict[str, Any]]
    fraction: so.Mapped[float]
    median_ms: so.Mapped[float]
    trial_id: so.Mapped[int] = so.mapped_column(sa.ForeignKey("tuner_trials.id"))
    job_id: so.Mapped[int] = so.mapped_column(sa.ForeignKey("tuner_jobs.id"))
    fingerprint: so.Mapped[dict[str, Any]]
    updated_at: so.Mapped[dt.datetime] = so.mapped_column(default=utcnow, onupdate=utcnow)


class Worker(Base):
    """A worker process of the fleet, as it announced itself, and its last heartbeat.

    ``name`` is the Celery node name (``cuda0.1234@host``); trials it claims carry it as their
    ``lease_owner``, so a stale heartbeat identifies the trials a vanished worker held.
    """

    __tablename__ = "tuner_workers"

    id: so.Mapped[int] = so.mapped_column(primary_key=True)
    name: so.Mapped[str] = so.mapped_column(sa.String(256), unique=True)
    host: so.Mapped[str] = so.mapped_column(sa.String(256))
    pid: so.Mapped[int]
    device: so.Mapped[str] = so.mapped_column(sa.String(32))
    device_kind: so.Mapped[str] = so.mapped_column(sa.String(64))
    device_name: so.Mapped[str] = so.mapped_column(sa.String(256))
    queues: so.Mapped[list[Any]]
    ceilings: so.Mapped[dict[str, Any]]
    status: so.Mapped[str] = so.mapped_column(sa.String(16), default="alive")
    started_at: so.Mapped[dt.datetime] = so.mapped_column(default=utcnow)
    last_heartbeat: so.Mapped[dt.datetime] = so.mapped_column(default=utcnow)
    trials_done: so.Mapped[int] = so.mapped_column(default=0)
