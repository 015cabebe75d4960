"""Copy told trials into their Optuna study in the service database (for the dashboard).

The service's own table is the source of truth; the Optuna study of each problem is its
record for ``optuna-dashboard``. ``Mirror.sync`` writes every told, not yet mirrored trial of a
job as a finished Optuna trial (params, value or FAIL, user attrs) — in one transaction per
batch through ``tuner.optuna_bulk`` when the installed Optuna's schema is the one it knows, one
``create_new_trial`` call per trial otherwise — then notes the Optuna trial ids on our rows. It
is idempotent: before its first write to a study it reads which of our trials the study already
holds (by the ``tuner_trial_id`` attr), so a crash between the two writes never duplicates a
trial. ``MirrorThread`` runs it in the background so recording never delays proposing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy.orm as so

from db import repository as repo
from db.models import Trial
from db.models import utcnow
from db.retry import is_transient
from db.session import make_engine
from search_spaces import SearchSpace
from tuner import optuna_bulk
from tuner.optuna_bulk import TrialRecord
from tuner.study import distributions
from tuner.study import storage_for
from tuner.types import TrialStatus

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
                 artifact_dir: Path | None = None, cache_dir: Path | None = None) -> None:
        self.artifact_dir = artifact_dir
        self.cache_dir = cache_dir
        self.sessions = sessions
        self.storage = storage_for(db_url)
        self.engine = make_engine(db_url)
        self.bulk = optuna_bulk.supported(self.engine)
        self._known: dict[str, dict[int, int]] = {}  # study name -> tuner id -> optuna id
        self._lock = threading.Lock()

    def _known_in(self, study_name: str) -> tuple[int, dict[int, int]]:
        study_id = self.storage.get_study_id_from_name(study_name)
        known = self._known.get(study_name)
        if known is None:
            known = {int(t.user_attrs["tuner_trial_id"]): t._trial_id
                     for t in self.storage.get_all_trials(study_id, deepcopy=False)
                     if "tuner_trial_id" in t.user_attrs}
            self._known[study_name] = known
        return study_id, known

    def sync(self, job_id: int, space: SearchSpace, limit: int = 200) -> int:
        """Mirror up to ``limit`` told trials of ``job_id``; returns how many were written."""
        with self._lock:
            with self.sessions() as session:
                pending = [(t, name) for t, name in repo.unmirrored_trials(session, job_id,
                                                                           limit)]
            ids: list[tuple[int, int]] = []
            by_study: dict[str, list[Trial]] = {}
            for t, study_name in pending:
                by_study.setdefault(study_name, []).append(t)
            for study_name, trials in by_study.items():
                study_id, known = self._known_in(study_name)
                ids += [(t.id, known[t.id]) for t in trials if t.id in known]
                new = [t for t in trials if t.id not in known]
                records = [trial_record(t, space) for t in new]
                if self.bulk:
                    optuna_ids = optuna_bulk.write(self.engine, study_id, records)
                else:
                    optuna_ids = [self.storage.create_new_trial(
                        study_id, template_trial=frozen_trial(r)) for r in records]
                for t, optuna_id in zip(new, optuna_ids, strict=True):
                    known[t.id] = optuna_id
                    ids.append((t.id, optuna_id))
            if ids:
                with self.sessions.begin() as session:
                    repo.set_optuna_trial_ids(session, ids)
            return len(ids)

    def flush(self, job_id: int, space: SearchSpace) -> None:
        """Mirror everything told so far (before a job is declared finished)."""
        while self.sync(job_id, space) > 0:
            pass

    def annotate(self, job_id: int) -> None:
        """Notes and roofline charts on the finished problems' studies (best effort: the
        trials are recorded either way)."""
        from tuner.study_notes import annotate_job

        try:
            annotate_job(self.sessions, self.storage, job_id, self.artifact_dir,
                         self.cache_dir)
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
