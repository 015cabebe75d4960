"""Drive one job: propose ▶ enqueue ▶ collect results from the database ▶ tell ▶ stop.

``JobDriver.step()`` does one non-blocking round and says whether the job is still active, so
the blocking ``tuner tune`` loop and a scheduler driving many jobs use the same code. All state
lives in the database: a new driver for the same job resumes where the last one stopped (queued
trials are re-sent — a duplicate delivery is harmless — and trials whose worker vanished are
requeued or marked lost by ``expire_leases``).

Under a scheduler a driver holds the job's lease (``lease``: owner name and seconds): every
transaction it writes in first renews that lease and fails with ``LeaseLost`` if another
scheduler has taken the job over, so two drivers of one job never both write.

Proposals come from an in-memory proposer (``tuner.control.searches``) rebuilt from the trial
table when a driver starts; told trials reach the problem's Optuna study in the database
through ``tuner.optuna.mirror``, and a job is declared finished only once all of them are
there.

Problems of a job run one after another; ``parallel`` trials of the current one are in flight.
Budget accounting follows the replay README: a *measured* trial is a distinct config that went
to a device (succeeded or failed). Statically invalid proposals and repeats are recorded and told
to Optuna but cost nothing; a long streak of them stops the problem. So does the same failure
on several measured configs in a row before any success (``tuner.control.failures``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import sqlalchemy.orm as so

from db import repository as repo
from db.models import Problem
from db.models import Trial
from db.models import utcnow
from search_spaces import Config
from search_spaces import Context
from search_spaces import stable_hash
from tuner.control.confirm import Confirmation
from tuner.control.failures import FailureStreak
from tuner.control.jobs import kernel_identity_of
from tuner.control.jobs import problem_context
from tuner.control.priors import Start
from tuner.control.priors import choose_start
from tuner.control.queue import BenchQueue
from tuner.control.queue import QueueUnavailable
from tuner.control.recording import JobIdentity
from tuner.control.recording import offer_trial
from tuner.control.searches import make_proposer
from tuner.control.tickets import trial_request
from tuner.core.launch import LAUNCH_OPTIONS
from tuner.core.types import BenchmarkRequest
from tuner.core.types import JobSpec
from tuner.core.types import TrialStatus
from tuner.kernels import KernelSpec
from tuner.kernels.identity import BUILTIN
from tuner.optuna.mirror import Mirror
from tuner.search import Proposer
from tuner.search import Told
from tuner.search.candidates import count_valid

log = logging.getLogger(__name__)

#: Consecutive invalid or repeated proposals after which a problem is stopped as stuck.
MAX_FREE_STREAK = 500
#: Proposals one fill may examine before yielding (keeps a step short).
MAX_PROPOSALS_PER_STEP = 200

FINAL_JOB_STATES = ("completed", "failed")
NOT_COUNTED = (TrialStatus.INVALID, TrialStatus.CANCELLED)


class LeaseLost(RuntimeError):
    """Another scheduler holds this job now; the transaction that found out was not made."""


@dataclass
class _ProblemRun:
    problem_id: int
    problem: dict[str, int]
    proposer: Proposer
    ctx: Context
    start: Start
    free_streak: int = 0
    failures: FailureStreak = field(default_factory=FailureStreak)
    valid_count: int | None = None
    counted: bool = False
    exhausted: bool = False


class JobDriver:
    """Drives one job through a queue; see the module docstring."""

    def __init__(self, sessions: so.sessionmaker[so.Session], db_url: str, job_id: int,
                 kernel: KernelSpec, queue: BenchQueue, mirror: Mirror, *,
                 heartbeat_s: float | None = None, republish_s: float | None = None,
                 lease: tuple[str, float] | None = None) -> None:
        """``heartbeat_s``: workers silent for three heartbeats lose their trials (fleet mode);
        ``republish_s``: queued trials unclaimed this long are published again; ``lease``:
        (owner, seconds) of the scheduler's job lease, renewed by every write."""
        self.sessions = sessions
        self.db_url = db_url
        self.job_id = job_id
        self.kernel = kernel
        self.queue = queue
        self.mirror = mirror
        self.heartbeat_s = heartbeat_s
        self.republish_s = republish_s
        self.lease = lease
        self._runs: dict[int, _ProblemRun] = {}
        self._epoch = queue.epoch()
        # Heartbeats are judged only after this driver has watched them for three beats: a
        # driver is built at start and again after a database outage, during which workers
        # could not write theirs (they are not vanished for it).
        self._judge_heartbeats_from = None if heartbeat_s is None else \
            utcnow() + dt.timedelta(seconds=3 * heartbeat_s)
        with sessions.begin() as session:
            job = repo.get_job(session, job_id)
            if job is None:
                raise LookupError(f"no job {job_id}")
            self.spec = JobSpec.from_json(job.spec)
            identity = job.kernel_identity or kernel_identity_of(kernel, self.spec.kernel)
            self.job = JobIdentity(job_id, self.spec, kernel.name, job.kernel_source_hash,
                                   job.space_hash, identity,
                                   self._valid if identity == BUILTIN else None)
            requests = [self._request(t, session) for t in repo.queued_trials(session, job_id)]
        self.publish(requests)  # resume: whatever was queued may never have been delivered
        self.confirmation = Confirmation(self.job, self.transaction,
                                         lambda rs: self.publish(rs, mark=False))

    def _valid(self, config: Any, problem: Any) -> bool:
        """The kernel's space accepts ``config`` for ``problem`` on the job's device."""
        ctx = problem_context(self.kernel, self.spec, self.kernel.canonical_problem(problem))
        return bool(self.kernel.space.is_valid(dict(config), ctx))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[so.Session]:
        """A write transaction of this driver, fenced by its lease (see the module docstring)."""
        with self.sessions.begin() as session:
            if self.lease is not None and not repo.hold_lease(session, self.job_id, *self.lease):
                raise LeaseLost(f"job {self.job_id} is driven by another scheduler now")
            yield session

    def _broker_restarted(self) -> bool:
        """True once each time the queue's epoch changes (see ``BenchQueue.epoch``)."""
        epoch = self.queue.epoch()
        if epoch is None:
            return False
        changed = self._epoch is not None and epoch != self._epoch
        self._epoch = epoch
        if changed:
            log.warning("job %s: the broker restarted; publishing its queued trials again",
                        self.job_id)
        return changed

    # -- one round --------------------------------------------------------------------------
    def step(self) -> bool:
        """One round for the current problem; False once the job is finished."""
        with self.transaction() as session:
            job = repo.get_job(session, self.job_id)
            assert job is not None
            status = job.status
            if status == "pending":
                repo.set_job_status(session, self.job_id, "running")
            problems = [p for p in repo.problems_of(session, self.job_id) if p.status != "done"]
            stale: list[str] = []
            if self._judge_heartbeats_from is not None and self.heartbeat_s is not None \
                    and utcnow() >= self._judge_heartbeats_from:
                silent_since = utcnow() - dt.timedelta(seconds=3 * self.heartbeat_s)
                stale = repo.stale_workers(session, silent_since)
            requeued, lost = repo.expire_leases(session, self.job_id, self.spec.max_attempts,
                                                stale)
            cut = None if self.republish_s is None else \
                utcnow() - dt.timedelta(seconds=self.republish_s)
            if self._broker_restarted():  # everything published before now may be gone
                cut = utcnow()
            requests = [self._request(t, session)
                        for t in repo.unpublished_or_stale(session, self.job_id, cut)]
        for t in requeued:
            log.warning("trial %s: worker vanished; requeued as attempt %s", t.id, t.attempt)
        self.publish(requests)
        for t in lost:
            log.warning("trial %s lost after %s attempts", t.id, t.attempt)
        if status in FINAL_JOB_STATES:
            return False
        for problem in problems:
            if self._advance(problem, cancelled=status == "cancelled"):
                return True
        self.mirror.flush(self.job_id, self.kernel.space)
        self.mirror.annotate(self.job_id)
        if status != "cancelled":
            with self.transaction() as session:
                repo.set_job_status(session, self.job_id, "completed")
        return False

    def _advance(self, problem: Problem, cancelled: bool) -> bool:
        run = self._run_for(problem)
        if problem.started_at is None:
            with self.transaction() as session:
                repo.update_problem(session, problem.id, status="running", started_at=utcnow())
        self._collect(run)
        with self.sessions() as session:
            fresh = session.get(Problem, problem.id)
            assert fresh is not None
            # Untold trials (in flight, or finished since _collect) hold their budget slot.
            pending = repo.count_untold(session, problem.id)
            reason = "cancelled" if cancelled else self._stop_reason(run, fresh)
        if reason is None:
            self._fill(run, fresh, pending)
            return True
        if pending > 0:
            return True
        if not cancelled and self.confirmation.in_progress(fresh):
            return True
        with self.transaction() as session:
            note = self.confirmation.conclude(session, fresh)
            repo.update_problem(session, problem.id, status="done",
                                stop_reason=reason + (f"; {note}" if note else ""),
                                finished_at=utcnow())
        return False

    # -- collect ------------------------------------------------------------------------------
    def _collect(self, run: _ProblemRun) -> None:
        """Tell the proposer every final, untold trial, and count it."""
        with self.sessions() as session:
            untold = list(repo.untold_final_trials(session, run.problem_id))
        if not untold:
            return
        with self.transaction() as session:
            problem = session.get(Problem, run.problem_id)
            assert problem is not None
            for t in untold:
                fraction = t.fraction if t.status == TrialStatus.OK else None
                run.proposer.tell(t.number, fraction)
                repo.mark_told(session, t.id)
                if t.status == TrialStatus.INVALID and t.static_status is not None:
                    run.free_streak += 1  # failed its static check: proposed, never measured
                if t.duplicate_of is None and t.status not in NOT_COUNTED:
                    problem.measured += 1
                    run.failures.add(str(t.status), t.error)
                    if fraction is not None and (problem.best_fraction is None
                                                 or fraction > problem.best_fraction):
                        problem.best_fraction = fraction
                        problem.best_trial_id = t.id
                        problem.last_improvement = problem.measured
                        if t.median_ms is not None:  # offered to production lookups
                            offer_trial(session, self.job, problem, t, fraction, t.median_ms)
            report = run.start.report(run.proposer)
            if report != problem.prior:  # which prior, and how far the search believes it
                problem.prior = report

    # -- stop rules ---------------------------------------------------------------------------
    def _stop_reason(self, run: _ProblemRun, problem: Problem) -> str | None:
        budget = self.spec.budget
        if problem.measured >= budget.trials:
            return f"budget of {budget.trials} trials spent"
        valid = self._valid_count(run)
        if valid is not None and problem.measured >= valid:
            return f"every valid config measured ({valid})"
        if budget.target_fraction is not None and (problem.best_fraction or 0.0) >= \
                budget.target_fraction:
            return f"target roofline fraction {budget.target_fraction:g} reached"
        if budget.patience is not None and \
                problem.measured - problem.last_improvement >= budget.patience:
            return f"no improvement in {budget.patience} trials"
        if budget.wall_s is not None and problem.started_at is not None:
            elapsed = (utcnow() - problem.started_at).total_seconds()
            if elapsed >= budget.wall_s:
                return f"time budget of {budget.wall_s:g} s spent"
        if run.exhausted:
            return "the search has no unmeasured valid config left"
        repeated = run.failures.stop_reason(problem.best_fraction is not None)
        if repeated is not None:
            return repeated
        if run.free_streak >= MAX_FREE_STREAK:
            return f"sampler proposed {run.free_streak} invalid or repeated configs in a row"
        return None

    def _valid_count(self, run: _ProblemRun) -> int | None:
        """The problem's number of valid configs (counted once; ``None``: too many to count),
        to detect that every one was measured."""
        if not run.counted:
            run.valid_count, run.counted = count_valid(self.kernel.space, run.ctx), True
        return run.valid_count

    # -- fill ---------------------------------------------------------------------------------
    def _fill(self, run: _ProblemRun, problem: Problem, pending: int) -> None:
        wanted = min(self.spec.parallel * (1 + self.spec.lookahead) - pending,
                     self.spec.budget.trials - problem.measured - pending)
        proposals = 0
        while wanted > 0 and proposals < MAX_PROPOSALS_PER_STEP \
                and run.free_streak < MAX_FREE_STREAK:
            proposals += 1
            sent = self._propose(run)
            if sent is None:  # the search has nothing left to propose
                run.exhausted = True
                return
            if sent:
                wanted -= 1

    def _propose(self, run: _ProblemRun) -> bool | None:
        """Ask once; True if a config was sent to a device, False for a free proposal, None
        when the search has nothing left to propose."""
        asked = run.proposer.ask()
        if asked is None:
            return None
        config = asked.config
        config_hash = stable_hash(self._measured_identity(config))
        violations = self.kernel.space.violations(config, run.ctx)
        common = dict(job_id=self.job_id, problem_id=run.problem_id, number=asked.number,
                      config=config, config_hash=config_hash)
        request = None
        with self.transaction() as session:
            if violations:
                t = repo.add_trial(session, status=str(TrialStatus.INVALID), told=True,
                                   error="; ".join(violations), finished_at=utcnow(),
                                   told_at=utcnow(), **common)
            else:
                original = repo.first_trial_with_config(session, run.problem_id, config_hash)
                if original is None:
                    first = TrialStatus.CHECKING if self.spec.static_check else \
                        TrialStatus.QUEUED
                    t = repo.add_trial(session, status=str(first), **common)
                    request = self._request(t, session)
                else:
                    t = repo.add_trial(session, told=True, told_at=utcnow(), **common,
                                       **_copied_result(original))
        if request is None:  # free: the proposer hears at once, before its next ask
            run.proposer.tell(asked.number, t.fraction if t.status == TrialStatus.OK else None)
            run.free_streak += 1
            return False
        run.free_streak = 0
        self.publish([request])
        return True

    def _measured_identity(self, config: Config) -> dict[str, Any]:
        """What makes two configs different measurements: all of it, except on the Triton
        interpreter, which ignores the launch options (warps, stages…): there, configs that
        differ only in those are one measurement, and a repeat is answered from the first."""
        if not self.spec.target.is_interpreter:
            return dict(config)
        return {k: v for k, v in config.items() if k not in LAUNCH_OPTIONS}

    def publish(self, requests: list[BenchmarkRequest], mark: bool = True) -> None:
        """Hand requests to the queue and note when; stop at the first broker failure (the
        rest stay queued in the database and are published on a later round)."""
        sent: list[int] = []
        for request in requests:
            try:
                self.queue.submit(request)
            except QueueUnavailable as exc:
                log.warning("job %s: %s; %d trial(s) wait in the database", self.job_id, exc,
                            len(requests) - len(sent))
                break
            sent.append(request.trial_id)
        if sent and mark:  # only a timestamp: a stale driver may still note what it sent
            with self.sessions.begin() as session:
                repo.mark_published(session, sent)

    def _request(self, t: Trial, session: so.Session) -> BenchmarkRequest:
        problem = session.get(Problem, t.problem_id)
        assert problem is not None
        return trial_request(self.job, t, problem)

    def _run_for(self, problem: Problem) -> _ProblemRun:
        run = self._runs.get(problem.id)
        if run is None:
            ctx = problem_context(self.kernel, self.spec, dict(problem.problem))
            with self.sessions() as session:
                start = choose_start(session, self.kernel, self.spec, dict(problem.problem),
                                     problem.problem_key)
                proposer = make_proposer(self.spec.sampler, self.kernel.space, ctx,
                                         self.spec.seed, start.prior, start.warm)
                history = [Told(t.number, dict(t.config), t.told, t.fraction
                                if t.status == TrialStatus.OK else None)
                           for t in repo.trials_of_problem(session, problem.id)]
            proposer.rebuild(history)
            run = _ProblemRun(problem.id, dict(problem.problem), proposer, ctx, start)
            self._runs[problem.id] = run
        return run


def _copied_result(original: Trial) -> dict[str, Any]:
    """Fields of a repeated proposal answered from ``original`` (not measured again)."""
    if not TrialStatus(original.status).is_final:
        return {"status": str(TrialStatus.CANCELLED), "duplicate_of": original.id,
                "finished_at": utcnow(),
                "error": f"repeat of trial #{original.number}, still in flight"}
    return {
        "status": original.status, "duplicate_of": original.id, "finished_at": utcnow(),
        "fraction": original.fraction, "median_ms": original.median_ms,
        "score_basis": original.score_basis, "device_kind": original.device_kind,
        "error": f"repeat of trial #{original.number}; not measured again",
    }

