"""Copy told trials into their Optuna study in the service database (for the dashboard).

The service's own table is the source of truth; the Optuna study of each problem is its
record for ``optuna-dashboard``. ``Mirror.sync`` writes every told, not yet mirrored trial of a
job as a finished Optuna trial (params, value or FAIL, user attrs) — in one transaction per
batch through ``tuner.optuna.bulk`` when the installed Optuna's schema is the one it knows, one
``create_new_trial`` call per trial otherwise — then notes the Optuna trial ids on our rows.

It is safe to run in several processes at once (two schedulers during a lease handover, a
scheduler and ``tuner tune``): each study's batch is written under a row lock on its problem,
and the batch is re-read under that lock, so a trial another process mirrored meanwhile is
skipped. On the bulk path the Optuna rows and our ids are written in the same transaction; on
the public-API path (one transaction per trial) the study is read first, so a crash between
the two writes never duplicates a trial. ``MirrorThread`` runs it in the background so
recording never delays proposing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy as sa
import sqlalchemy.orm as so

from db import repository as repo
from db.models import Trial
from db.models import utcnow
from db.retry import is_transient
from db.session import normalise_url
from search_spaces import SearchSpace
from tuner.core.device_time import queue_wait_s
from tuner.core.device_time import trial_phases
from tuner.core.types import TrialStatus
from tuner.optuna import bulk
from tuner.optuna.bulk import TrialRecord
from tuner.optuna.storage import distributions
from tuner.optuna.storage import storage_for

log = logging.getLogger(__name__)


def trial_attrs(t: Trial) -> dict[str, Any]:
    """User attrs of a trial in its Optuna study: what the dashboard's trial table shows."""
    prov = t.provenance or {}
    attrs = {
        "status": t.status, "median_ms": t.median_ms, "tflops": t.tflops, "gbps": t.gbps,
        "bound": t.bound, "gpu": prov.get("device_name") or t.device_kind,
        "compile_s": t.compile_s, "p20_ms": t.p20_ms, "p80_ms": t.p80_ms,
        "fraction_measured_ceilings": t.fraction_measured, "score_basis": t.score_basis,
        "tuner_trial_id": t.id, "tuner_number": t.number, "attempt": t.attempt,
        "duplicate_of": t.duplicate_of, "error": (t.error or "")[:500] or None,
    }
    if t.phases:
        wait = queue_wait_s(t.published_at, t.started_at)
        for name, value in trial_phases(t.phases, wait).items():
            attrs[f"phase_{name}"] = value
    return {k: v for k, v in attrs.items() if v is not None}


def trial_record(t: Trial, space: SearchSpace) -> TrialRecord:
    ok = t.status == TrialStatus.OK and t.fraction is not None
    config = {} if space.domain_errors(t.config) else dict(t.config)
    finished = t.finished_at or t.told_at or utcnow()
    return TrialRecord(params=config, distributions=distributions(space, config),
                       value=t.fraction if ok else None, user_attrs=trial_attrs(t),
                       started=t.started_at or t.queued_at or finished, finished=finished)


def frozen_trial(r: TrialRecord) -> optuna.trial.FrozenTrial:
    """The same record for Optuna's public API (the fallback path)."""
    return optuna.trial.create_trial(
        state=optuna.trial.TrialState.COMPLETE if r.value is not None
        else optuna.trial.TrialState.FAIL,
        value=r.value, params=r.params, distributions=r.distributions,
        user_attrs=r.user_attrs)


class Mirror:
    """Writes told trials of jobs into their Optuna studies (one instance per process)."""

    def __init__(self, sessions: so.sessionmaker[so.Session], db_url: str,
                 artifact_dir: Path | None = None) -> None:
        """``sessions`` and ``db_url`` name the same database: the bulk path writes Optuna's
        rows through ``sessions``, in the transaction that notes their ids on ours."""
        self.artifact_dir = artifact_dir
        self.sessions = sessions
        self.storage = storage_for(db_url)
        self.bulk = bulk.supported(sa.make_url(normalise_url(db_url)).get_backend_name())
        self._lock = threading.Lock()

    def sync(self, job_id: int, space: SearchSpace, limit: int = 200) -> int:
        """Mirror up to ``limit`` told trials of ``job_id``; returns how many of them are now
        in their study (written here or, meanwhile, by another process)."""
        with self._lock:
            with self.sessions() as session:
                pending = repo.unmirrored_trials(session, job_id, limit)
            by_study: dict[tuple[int, str], list[int]] = {}
            for trial_id, problem_id, study_name in pending:
                by_study.setdefault((problem_id, study_name), []).append(trial_id)
            for (problem_id, study_name), trial_ids in by_study.items():
                self._sync_study(problem_id, study_name, trial_ids, space)
            return len(pending)

    def _sync_study(self, problem_id: int, study_name: str, trial_ids: list[int],
                    space: SearchSpace) -> None:
        with self.sessions.begin() as session:
            repo.lock_problem(session, problem_id)  # one mirror per study at a time
            trials = repo.unmirrored_among(session, trial_ids)
            if not trials:
                return
            study_id = self.storage.get_study_id_from_name(study_name)
            if self.bulk:
                records = [trial_record(t, space) for t in trials]
                optuna_ids = bulk.write(session.connection(), study_id, records)
                pairs = [(t.id, i) for t, i in zip(trials, optuna_ids, strict=True)]
            else:
                recorded = {int(ot.user_attrs["tuner_trial_id"]): ot._trial_id
                            for ot in self.storage.get_all_trials(study_id, deepcopy=False)
                            if "tuner_trial_id" in ot.user_attrs}
                pairs = [(t.id, recorded[t.id] if t.id in recorded else
                          self.storage.create_new_trial(
                              study_id, template_trial=frozen_trial(trial_record(t, space))))
                         for t in trials]
            repo.set_optuna_trial_ids(session, pairs)

    def flush(self, job_id: int, space: SearchSpace) -> None:
        """Mirror everything told so far (before a job is declared finished)."""
        while self.sync(job_id, space) > 0:
            pass

    def annotate(self, job_id: int) -> None:
        """Notes and roofline charts on the finished problems' studies (best effort: the
        trials are recorded either way)."""
        from tuner.optuna.notes import annotate_job

        try:
            annotate_job(self.sessions, self.storage, job_id, self.artifact_dir)
        except Exception:
            log.exception("annotating the studies of job %s failed", job_id)


class MirrorThread:
    """Calls ``mirror.sync`` for the jobs ``jobs()`` names, every ``interval_s`` seconds."""

    def __init__(self, mirror: Mirror, jobs: Callable[[], dict[int, SearchSpace]],
                 interval_s: float = 0.2) -> None:
        self.mirror = mirror
        self.jobs = jobs
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="optuna-mirror", daemon=True)

    def start(self) -> MirrorThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for job_id, space in list(self.jobs().items()):
                try:
                    self.mirror.sync(job_id, space)
                except Exception as exc:
                    if not is_transient(exc):
                        log.exception("mirroring job %s failed", job_id)
                    break

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
