"""What a finished problem's Optuna study shows in optuna-dashboard beyond its trials: a note
summarising the best config against the roofline, and the roofline chart of its trials as an
artifact (when an artifact folder is configured: ``TUNER_ARTIFACT_DIR``, default
``<data dir>/artifacts``; ``tuner dashboard`` serves the same folder).
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import optuna
import sqlalchemy.orm as so

from db import repository as repo
from db.models import Problem
from db.models import Trial
from tuner.charts import Point
from tuner.charts import device_ceilings
from tuner.charts import roofline_png
from tuner.charts import stored_ceilings

log = logging.getLogger(__name__)

#: Where ``optuna_dashboard``'s note module is kept once loaded on its own (``note_saver``).
NOTE_MODULE = "tuner_optuna_dashboard_note"


def note_saver() -> Callable[[optuna.Study, str], None]:
    """``optuna_dashboard.save_note``, without importing the dashboard's web application.

    ``import optuna_dashboard`` loads its server, which imports ``optuna.importance`` and so
    scikit-learn where it is installed: about 1.9 s of every ``tuner tune`` for one function
    that writes study attributes. Its module (``optuna_dashboard/_note.py``, which imports only
    optuna) is loaded from its file instead; when that fails, the package is imported."""
    if "optuna_dashboard" in sys.modules:
        return _public_saver()
    module = sys.modules.get(NOTE_MODULE)
    if module is None:
        found = importlib.util.find_spec("optuna_dashboard")
        origin = Path(found.origin) if found is not None and found.origin else None
        spec = None if origin is None else importlib.util.spec_from_file_location(
            NOTE_MODULE, origin.parent / "_note.py")
        try:
            if spec is None or spec.loader is None:
                raise ImportError("optuna_dashboard/_note.py not found")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except (ImportError, OSError, SyntaxError):
            return _public_saver()
        sys.modules[NOTE_MODULE] = module
    saver: Callable[[optuna.Study, str], None] | None = getattr(module, "save_note", None)
    return saver if callable(saver) else _public_saver()


def _public_saver() -> Callable[[optuna.Study, str], None]:
    from optuna_dashboard import save_note

    saver: Callable[[optuna.Study, str], None] = save_note
    return saver


def note_markdown(problem: Problem, best: Trial | None, counts: dict[str, int],
                  dashboard_number: int | None = None) -> str:
    """The study note: the winner against the roofline, why the search stopped, outcomes.
    Trials are named by the service's number (``tuner status``, the CLI) and, when known, the
    number this dashboard shows for the same trial (Optuna numbers trials as they are told)."""
    lines = [f"## {problem.problem_key}", ""]
    if best is None:
        lines.append("No config succeeded.")
    else:
        ms = best.confirm_ms or best.median_ms
        config = ", ".join(f"`{k}={v}`" for k, v in best.config.items())
        shown = "" if dashboard_number is None else f", trial {dashboard_number} in this list"
        lines += [f"**Best config** (tuner trial #{best.number}{shown}; user attr "
                  f"`tuner_number` = {best.number}): {config}", "",
                  f"**{problem.best_fraction or best.fraction or 0:.3g} of the roofline** "
                  f"({best.score_basis} basis, "
                  f"{best.bound}-bound): {ms:.4g} ms measured"
                  + (" (re-timed interleaved)" if best.confirm_ms else "")
                  + f" vs {best.roof_ms:.4g} ms roofline; {best.tflops or 0:.3g} TFLOP/s, "
                  f"{best.gbps or 0:.3g} GB/s on {best.device_kind}."]
        if best.confirm_ms:
            lines += ["", "This is the winner of the interleaved re-timing of the finalists; "
                      "the dashboard's *best trial* is the highest single measurement, which "
                      "noise may favour."]
    lines += ["", f"Stopped: {problem.stop_reason or 'running'}.", "",
              "Trials by status: " + ", ".join(f"{s} {n}" for s, n in sorted(counts.items()))]
    return "\n".join(lines)


def annotate_job(sessions: so.sessionmaker[so.Session], storage: optuna.storages.BaseStorage,
                 job_id: int, artifact_dir: Path | None) -> int:
    """Note (and chart) every finished problem of a job; returns how many were annotated."""
    save_note = note_saver()

    with sessions() as session:
        job = repo.get_job(session, job_id)
        dtype = job.dtype if job is not None else None
        problems = [p for p in repo.problems_of(session, job_id) if p.status == "done"]
        trials = list(repo.trials_of_job(session, job_id))
        session.expunge_all()
    done = 0
    for p in problems:
        mine = [t for t in trials if t.problem_id == p.id]
        counts: dict[str, int] = {}
        for t in mine:
            counts[t.status] = counts.get(t.status, 0) + 1
        best = next((t for t in mine if t.id == p.best_trial_id), None)
        study = optuna.load_study(study_name=p.study_name, storage=storage)
        number = None if best is None else next(
            (ot.number for ot in study.get_trials(deepcopy=False)
             if ot.user_attrs.get("tuner_trial_id") == best.id), None)
        save_note(study, note_markdown(p, best, counts, number))
        if artifact_dir is not None:
            _upload_chart(study, p, mine, best, artifact_dir, dtype)
        done += 1
    return done


def _upload_chart(study: optuna.Study, problem: Problem, trials: list[Trial],
                  best: Trial | None, artifact_dir: Path, dtype: str | None) -> None:
    from optuna.artifacts import FileSystemArtifactStore
    from optuna.artifacts import upload_artifact

    points = [Point(t.intensity, t.tflops, "best" if t is best else "",
                    60 if t is best else 20, "tab:red" if t is best else "tab:blue")
              for t in trials if t.status == "ok" and t.intensity and t.tflops]
    kind = best.device_kind if best else None
    ceilings = device_ceilings(kind, stored_ceilings(([best] if best else []) + trials))
    artifact_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"roofline-{problem.problem_key}.png"
        roofline_png(points, ceilings, path, f"{problem.study_name}: roofline of its trials",
                     dtype=dtype)
        upload_artifact(artifact_store=FileSystemArtifactStore(str(artifact_dir)),
                        file_path=str(path), study_or_trial=study, mimetype="image/png")
