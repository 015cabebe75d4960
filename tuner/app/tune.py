"""``tune``: one local tuning job from the options a user gave, start to summary — the one
composition the ``tuner tune`` command and the Python API (``tuner.tune``) share.

Input is validated once, here at the entry (``build_spec``: ``UsageError``/``KernelError`` with
a one-line message before anything is written); the rest is ``run_local_job``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.app.local import TuneOutcome
from tuner.app.local import run_local_job
from tuner.app.options import JobOptions
from tuner.app.options import build_spec
from tuner.core.settings import Settings
from tuner.views.jobs import JobSummary
from tuner.views.jobs import job_summary
from tuner.views.progress import OnEvent
from tuner.views.progress import ignore


@dataclass(frozen=True)
class TuneRun:
    """A finished (or interrupted) local job and what it found."""

    outcome: TuneOutcome
    summary: JobSummary

    @property
    def failed_problems(self) -> int:
        """Problems without one successful trial."""
        return sum(1 for view in self.summary.problems if view.best is None)


def tune(options: JobOptions, settings: Settings, on_event: OnEvent = ignore) -> TuneRun:
    """Build the job, run it on this machine (progress to ``on_event``), summarise it."""
    spec, kernel = build_spec(options, settings, submit=False)
    outcome = run_local_job(spec, kernel, settings, on_event)
    return TuneRun(outcome, job_summary(settings, outcome.job_id))
