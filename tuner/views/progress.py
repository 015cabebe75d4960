"""A job's progress as events: what a local run or a watched fleet job reports as it goes.

The app emits them through an ``on_event`` callback; the CLI renders them with rich, the Python
API as plain lines (``describe``), tests collect them. Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy.orm as so

from db import repository as repo


@dataclass(frozen=True)
class WorkersStarting:
    """``count`` local bench processes are starting on ``backend``."""

    count: int
    backend: str


@dataclass(frozen=True)
class ProblemProgress:
    """One problem's state: ``measured`` (distinct configs) of its ``trials`` budget, its best
    roofline fraction so far (``None``: no config passed yet), whether its search is over, and
    ``note``: what it waits for once its trials are in (the finalists' re-timing), or why it
    stopped short of its budget."""

    problem_id: int
    problem_key: str
    measured: int
    trials: int
    best_fraction: float | None
    done: bool
    note: str = ""


@dataclass(frozen=True)
class NewBest:
    """A problem has a new best config (``confirmed``: the winner of the interleaved
    re-timing), trial ``number``, at ``fraction`` of the roofline and ``median_ms``."""

    problem_key: str
    number: int
    fraction: float | None
    median_ms: float
    config: dict[str, Any]
    confirmed: bool


@dataclass(frozen=True)
class Interrupted:
    """The run was interrupted: the job is cancelled, every finished trial kept."""

    job_id: int


@dataclass(frozen=True)
class Waiting:
    """A fleet job cannot move: no live worker serves its ``device_kind`` (``False`` once one
    does again)."""

    device_kind: str
    waiting: bool


Event = WorkersStarting | ProblemProgress | NewBest | Interrupted | Waiting
OnEvent = Callable[[Event], None]


def ignore(event: Event) -> None:
    """An ``on_event`` that drops every event."""


def config_text(config: dict[str, Any] | None) -> str:
    """``BLOCK_M=64 BLOCK_N=64 …`` (``–`` for no config)."""
    if not config:
        return "–"
    return " ".join(f"{k}={v}" for k, v in config.items())


def describe(event: Event) -> str | None:
    """One plain line for an event worth a line (new bests, starts, interruptions)."""
    if isinstance(event, WorkersStarting):
        return f"starting {event.count} local worker(s) on backend {event.backend}…"
    if isinstance(event, NewBest):
        label = "confirmed best" if event.confirmed else "new best"
        best = "–" if event.fraction is None else f"{event.fraction:.4g}"
        return (f"{label} {event.problem_key} #{event.number}: {best} of the roofline, "
                f"{event.median_ms:.4g} ms  {config_text(event.config)}")
    if isinstance(event, Interrupted):
        return f"interrupted: job {event.job_id} cancelled; every finished trial is kept"
    if isinstance(event, Waiting):
        return waiting_text(event)
    return None


def waiting_text(event: Waiting) -> str:
    if not event.waiting:
        return f"a worker serves {event.device_kind} again"
    return (f"waiting: no live worker serves {event.device_kind}; start one on a host with that "
            "device (tuner worker --device cuda:N, or cpu) — tuner workers lists them")


class JobProgress:
    """Turns a job's rows into events: on each ``poll``, one ``ProblemProgress`` per problem
    and one ``NewBest`` per problem whose best trial changed since the last poll."""

    def __init__(self, sessions: so.sessionmaker[so.Session], job_id: int, trials: int) -> None:
        self.sessions = sessions
        self.job_id = job_id
        self.trials = trials
        self._bests: dict[int, int] = {}

    def poll(self) -> list[Event]:
        events: list[Event] = []
        with self.sessions() as session:
            for p in repo.problems_of(session, self.job_id):
                events.append(ProblemProgress(p.id, p.problem_key, p.measured, self.trials,
                                              p.best_fraction, p.status == "done",
                                              _note(p, self.trials)))
                if p.best_trial_id is not None and self._bests.get(p.id) != p.best_trial_id:
                    self._bests[p.id] = p.best_trial_id
                    t = repo.get_trial(session, p.best_trial_id)
                    if t is not None:
                        confirmed = t.confirm_ms is not None
                        ms = t.confirm_ms if confirmed else t.median_ms
                        events.append(NewBest(p.problem_key, t.number, p.best_fraction,
                                              float(ms or 0.0), dict(t.config), confirmed))
        return events


def _note(problem: Any, trials: int) -> str:
    if problem.status != "done" and problem.confirm_status == "pending":
        return "re-timing the finalists"
    if problem.status == "done" and problem.measured < trials and problem.stop_reason:
        return str(problem.stop_reason).split(";")[0]  # the reason, not the confirmation
    return ""
