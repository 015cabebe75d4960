"""How the CLI shows a job: live progress bars from the app's events, and the summary of a
finished job."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn
from rich.progress import MofNCompleteColumn
from rich.progress import Progress
from rich.progress import TaskID
from rich.progress import TextColumn
from rich.progress import TimeElapsedColumn
from rich.table import Table

from db.models import Trial
from db.session import safe_url
from tuner.core.device_time import PHASES
from tuner.core.device_time import DeviceTime
from tuner.core.target import Evidence
from tuner.core.target import as_target
from tuner.views.jobs import JobSummary
from tuner.views.jobs import prior_text
from tuner.views.progress import Event
from tuner.views.progress import Interrupted
from tuner.views.progress import NewBest
from tuner.views.progress import ProblemProgress
from tuner.views.progress import Waiting
from tuner.views.progress import WorkersStarting
from tuner.views.progress import config_text
from tuner.views.progress import waiting_text


class ProgressBars:
    """Renders progress events: one bar per problem (measured of its budget, best fraction),
    a line per new best. Use as a context manager around the run; pass ``show`` as the
    ``on_event`` callback. The live display starts with the first problem, so a run that
    fails before it leaves nothing but its error."""

    def __init__(self, err: Console) -> None:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("best {task.fields[best]}"), TimeElapsedColumn())
        self.err = err
        self.progress = Progress(*columns, console=err, transient=False)
        self.tasks: dict[int, TaskID] = {}
        self._live = False

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live:
            self.progress.stop()
            self._live = False

    def show(self, event: Event) -> None:
        if isinstance(event, WorkersStarting):
            self.err.print(f"[dim]starting {event.count} local worker(s) on backend "
                           f"{event.backend}…[/]")
        elif isinstance(event, ProblemProgress):
            best = f"{event.best_fraction:.4g}" if event.best_fraction is not None else "–"
            if not self._live:
                self.progress.start()
                self._live = True
            if event.problem_id not in self.tasks:
                self.tasks[event.problem_id] = self.progress.add_task(
                    event.problem_key, total=event.trials, best=best)
            # measurements against the budget; a problem that stopped early ends full at
            # what it measured (never "N/N" for a budget it did not spend)
            self.progress.update(
                self.tasks[event.problem_id], completed=event.measured,
                total=max(event.measured, 1) if event.done else event.trials, best=best,
                description=event.problem_key + (" ✓" if event.done else "")
                + (f" ({event.note})" if event.note else ""))
        elif isinstance(event, NewBest):
            label = "confirmed best" if event.confirmed else "new best"
            best = f"{event.fraction:.4g}" if event.fraction is not None else "–"
            self.progress.console.print(
                f"[green]{label}[/] {event.problem_key} #{event.number}: {best} of the "
                f"roofline, {event.median_ms:.4g} ms  [dim]{config_text(event.config)}[/]",
                highlight=False)
        elif isinstance(event, Waiting):
            self.progress.console.print(f"[yellow]{waiting_text(event)}[/]", highlight=False)
        elif isinstance(event, Interrupted):
            self.err.print(f"[yellow]interrupted: job {event.job_id} cancelled; every "
                           "finished trial is kept[/]")


def describe_score(t: Trial) -> str:
    """One line: the fraction, what it is a fraction of, and the throughput."""
    if t.score_basis == "recorded-best":
        return (f"{t.fraction:.4g} of the recorded optimum: {t.median_ms:.4g} ms vs "
                f"{t.roof_ms:.4g} ms")
    rates = "" if t.tflops is None else f", {t.tflops:.4g} TFLOP/s, {t.gbps:.4g} GB/s"
    if t.score_basis == "predicted":
        source = "SIMULATED on a stand-in GPU (its time: the analytic model, else the " \
            "roofline)" if (t.provenance or {}).get("simulated") else \
            "PREDICTED by the analytic model"
        return (f"{source} (not a measurement): {t.median_ms:.4g} ms, "
                f"{t.fraction:.4g} of the datasheet roofline ({t.bound}-bound){rates}")
    median = t.median_ms if t.confirm_ms is None else t.confirm_ms
    fraction = t.fraction if t.confirm_ms is None or not t.roof_ms else t.roof_ms / t.confirm_ms
    confirmed = "" if t.confirm_ms is None else " (re-timed interleaved)"
    if t.score_basis == "implausible":
        return (f"IMPLAUSIBLE: {fraction:.4g} of the roofline, above what the device can do: "
                f"the kernel's FLOP or byte count is wrong; never served (median "
                f"{median:.4g} ms{confirmed})")
    return (f"roofline fraction {fraction:.4g} ({t.score_basis} roofline, {t.bound}-bound): "
            f"median {median:.4g} ms{confirmed} vs roof {t.roof_ms:.4g} ms{rates}")


def print_summary(summary: JobSummary, db_url: str, console: Console) -> None:
    """The result of a finished job: each problem's best config and score, the trials by
    status, and what to do next."""
    job = summary.job
    for view in summary.problems:
        p = view.problem
        console.print(f"[bold]{job.kernel} {p.problem_key} {job.dtype} on "
                      f"{job.device_kind}[/] (job {job.id}, {p.measured} measured; "
                      f"{p.stop_reason or p.status})", highlight=False)
        if p.prior:
            console.print(f"  started from {escape(prior_text(p.prior))}", highlight=False)
        t = view.best
        if t is None or t.fraction is None or t.median_ms is None:
            if view.failure is None and p.measured:
                console.print("  no config could be scored: the kernel's FLOP or byte count is "
                              "not a finite, non-negative number")
            elif view.failure is None:
                console.print("  no config was measured")
            else:
                text, n, total = view.failure
                console.print(f"  no config succeeded; {n} of {total} failed with {text}",
                              highlight=False)
            continue
        console.print(f"  best config: {config_text(t.config)}", highlight=False)
        console.print(f"  {describe_score(t)}", highlight=False)
    by_status = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items()))
    console.print(f"trials by status: {by_status}")
    if summary.device_time is not None and summary.device_time.workers:
        console.print(device_time_lines(summary.device_time)[0], highlight=False)
    console.print(f"database: {safe_url(db_url)}")
    ref = str((job.spec or {}).get("kernel") or job.kernel)  # a file kernel: its path:NAME
    shapes = [",".join(f"{k}={v}" for k, v in view.problem.problem.items())
              for view in summary.problems]
    shape = shapes[0] if len(shapes) == 1 else "…"
    if as_target(job.backend).evidence in (Evidence.PREDICTED, Evidence.SIMULATED):
        console.print(f"next: tuner status {job.id} · tuner dashboard · these are predictions, "
                      "never served as tuned configs: measure them on a GPU with tuner tune "
                      f"{ref} --shape {shape} --dtype {job.dtype} --backend cuda",
                      highlight=False)
        return
    where = ""
    if as_target(job.backend).evidence is Evidence.RECORDED:  # stored under the recording's
        ref, where = job.kernel, f" --gpu {job.device_kind}"  # kernel and GPU, not this host's
    console.print(f"next: tuner status {job.id} · tuner dashboard · tuner best "
                  f"{ref} --shape {shape} --dtype {job.dtype}{where}", highlight=False)


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def device_time_lines(dt: DeviceTime) -> list[str]:
    """A job's device time in words (``tuner.core.device_time`` defines the terms)."""
    lines = []
    if dt.workers:
        busy = dt.busy_fraction
        lines.append(
            f"device time: {dt.gpu_seconds:.1f} device-seconds held on {len(dt.workers)} "
            f"device(s), busy measuring {'–' if busy is None else f'{busy:.0%}'} "
            f"({dt.busy_s:.1f} s); on-device compile "
            f"{sum(w.on_device_compile_s for w in dt.workers):.1f} s, idle "
            f"{sum(w.idle_s for w in dt.workers):.1f} s")
    if dt.compiles:
        hits = f", cache hits {dt.cache_hits}/{dt.cache_known}" if dt.cache_known else ""
        lines.append(f"compiles: {dt.compile_s:.1f} s over {dt.compiles} trial(s){hits}")
    medians = ", ".join(f"{name.removesuffix('_s').replace('_', ' ')} {_s(v)}"
                        for name, v in dt.medians.items() if v is not None)
    if medians:
        lines.append(f"median seconds per trial: {medians}")
    return lines


def phase_table(rows: list[tuple[int, str, dict[str, Any]]]) -> Table:
    """Every measured trial's phases (seconds), as ``tuner status JOB --trials`` shows them."""
    table = Table("trial", "status", *(p.removesuffix("_s").replace("_", " ") + " s"
                                       for p in PHASES), "cache hit", header_style="bold")
    for number, status, ph in rows:
        hit = ph.get("cache_hit")
        table.add_row(str(number), status, *(_s(ph.get(p)) for p in PHASES),
                      "–" if hit is None else ("yes" if hit else "no"))
    return table
