"""``tuner report JOB``: one HTML page (with its PNG charts beside it) about a tuning job.

The page holds, in order: the job's settings; the best config of each problem against the
roofline; the roofline chart of every measured trial (arithmetic intensity vs achieved
TFLOP/s under the device's roofs; the best of each problem in red); the search history (each
trial's fraction and the best so far, per problem); where the device time went (per device:
held, busy, on-device compile and idle seconds; median seconds per phase; a timeline chart of
busy vs compile vs idle, ``tuner.core.device_time``); and the breakdown of trials by status
with one example error each. Element ids (``best-configs``, ``roofline``, ``history``,
``device-time``, ``timeline``, ``failures``) are stable for tests and scripts.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import sqlalchemy.orm as so

from db import repository as repo
from db.models import Job
from db.models import Problem
from db.models import Trial
from tuner.charts import Point
from tuner.charts import device_ceilings
from tuner.charts import history_png
from tuner.charts import roofline_png
from tuner.charts import stored_ceilings
from tuner.charts import timeline_png
from tuner.core.device_time import account
from tuner.core.device_time import queue_wait_s
from tuner.core.device_time import segments
from tuner.views.jobs import prior_text

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;
text-align:left;font-size:.9em}th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee}
code{font-size:.85em}"""


def _table(element_id: str, header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f'<table id="{element_id}"><tr>{head}</tr>{body}</table>'


def _fmt(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


def _config_text(config: dict[str, Any] | None) -> str:
    return " ".join(f"{k}={v}" for k, v in (config or {}).items()) or "–"


def _charts(job: Job, problems: list[Problem], trials: list[Trial], out: Path,
            ) -> tuple[int, str]:
    best_ids = {p.best_trial_id for p in problems}
    points = [Point(t.intensity, t.tflops, "best" if t.id in best_ids else "",
                    60 if t.id in best_ids else 20,
                    "tab:red" if t.id in best_ids else "tab:blue")
              for t in trials if t.status == "ok" and t.intensity and t.tflops]
    kind = job.spec.get("device_kind")
    best = [t for t in trials if t.id in best_ids]  # the calibration the winners were scored on
    ceilings = device_ceilings(kind, stored_ceilings(best + trials))
    drawn = roofline_png(points, ceilings, out / "roofline.png",
                         f"job {job.id}: {job.kernel} {job.dtype} on {kind}", dtype=job.dtype)
    series = {p.problem_key: [t.fraction for t in trials
                              if t.problem_id == p.id and t.status not in ("invalid",
                                                                           "cancelled")]
              for p in problems}
    history_png(series, out / "history.png", f"job {job.id}: search history")
    return drawn, str(kind)


def _device_section(job: Job, trials: list[Trial], out: Path) -> str:
    """Where the job's device time went: a table per device and the timeline chart."""
    timed = [t for t in trials if t.phases]
    if not timed:
        return ""
    dt = account((t.phases, queue_wait_s(t.published_at, t.started_at)) for t in timed)
    busy = dt.busy_fraction
    rows = [[w.worker, w.trials, _fmt(w.span_s), _fmt(w.busy_s), _fmt(w.on_device_compile_s),
             _fmt(w.idle_s), _fmt(w.busy_s / w.span_s if w.span_s > 0 else None)]
            for w in dt.workers]
    phase_rows = [[name, _fmt(value)] for name, value in dt.medians.items()]
    drawn = timeline_png(segments(t.phases for t in timed if t.phases), out / "timeline.png",
                         f"job {job.id}: device busy vs compile vs idle")
    hits = f"{dt.cache_hits} of {dt.cache_known}" if dt.cache_known else "unknown"
    return f"""<h2>Device time</h2><p>{_fmt(dt.gpu_seconds)} device-seconds held, busy
measuring {'–' if busy is None else f'{busy:.1%}'}; compiles {_fmt(dt.compile_s)} s over
{dt.compiles} trials, cache hits {hits}.</p>
{_table("device-time", ["device", "trials", "held s", "busy s", "on-device compile s",
                        "idle s", "busy fraction"], rows)}
{_table("phases", ["phase", "median s"], phase_rows)}
<p>{drawn} pieces: green busy, orange compiling on the device, blue the compile pool.</p>
<img id="timeline" src="timeline.png" alt="device busy, compile and idle time per device">
"""


def _profile_section(profile_path: Path | None, out: Path) -> str:
    """The roofline chart of a ``tuner profile --out`` file, when one is given."""
    if profile_path is None:
        return ""
    import json

    from tuner.advisor.chart import roofline_chart
    from tuner.advisor.profile import Profile

    profile = Profile.from_json(json.loads(profile_path.read_text()))
    n = roofline_chart(profile, profile.peaks, profile.bandwidth_gbps,
                       out / "profile_roofline.png")
    return (f'<h2>Profile of {html.escape(profile.program)}</h2><p>{n} operator groups on '
            f'{html.escape(profile.device_kind)}; size: share of the program\'s time.</p>'
            '<img id="profile" src="profile_roofline.png" alt="roofline of the profile">')


def build_report(sessions: so.sessionmaker[so.Session], job_id: int, out: Path,
                 profile: Path | None = None) -> Path:
    """Write ``report.html``, ``roofline.png`` and ``history.png`` under ``out`` (and, given a
    profile from ``tuner profile --out``, its roofline chart); returns the page's path.
    Raises ``LookupError`` for an unknown job."""
    with sessions() as session:
        job = repo.get_job(session, job_id)
        if job is None:
            raise LookupError(f"no job {job_id}")
        problems = list(repo.problems_of(session, job_id))
        trials = list(repo.trials_of_job(session, job_id))
        counts = repo.status_counts(session, job_id)
        session.expunge_all()
    out.mkdir(parents=True, exist_ok=True)
    drawn, kind = _charts(job, problems, trials, out)
    by_id = {t.id: t for t in trials}
    best_rows: list[list[Any]] = []
    for p in problems:
        t = by_id.get(p.best_trial_id or -1)
        if t is None:
            best_rows.append([p.problem_key, p.status, p.measured, "–", "–", "–", "–", "–",
                              p.stop_reason or ""])
            continue
        best_rows.append([p.problem_key, p.status, p.measured, _config_text(t.config),
                          _fmt(p.best_fraction), _fmt(t.confirm_ms or t.median_ms),
                          _fmt(t.roof_ms), t.bound or "–", p.stop_reason or ""])
    errors: dict[str, str] = {}
    for t in trials:
        if t.error and t.status not in errors:
            errors[t.status] = t.error.strip().splitlines()[0][:200]
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])
    failure_rows = [[status, n, errors.get(status, "")] for status, n in ordered]
    spec = job.spec
    settings: list[list[Any]] = [
        ["kernel", job.kernel], ["dtype", spec.get("dtype")], ["device kind", kind],
        ["backend", spec.get("backend")], ["sampler", spec.get("sampler")],
        ["status", job.status], ["trials", len(trials)]]
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>tuner report: job {job.id} ({html.escape(job.kernel)})</title><style>{STYLE}</style>
</head><body><h1>Job {job.id}: {html.escape(job.kernel)}</h1>
{_table("job", ["setting", "value"], settings)}
<h2>Best configs</h2>
{_table("best-configs", ["problem", "status", "measured", "config", "roofline fraction",
                         "median ms", "roofline ms", "bound", "stopped because"], best_rows)}
<h2>Where each search started</h2>
{_table("priors", ["problem", "prior and trust"],
        [[p.problem_key, prior_text(p.prior)] for p in problems])}
<h2>Roofline</h2><p>{drawn} measured trials; the best of each problem in red.</p>
<img id="roofline" src="roofline.png" alt="roofline chart of every measured trial">
<h2>Search history</h2>
<img id="history" src="history.png" alt="fraction of each trial and the best so far">
{_device_section(job, trials, out)}
<h2>Trials by status</h2>
{_table("failures", ["status", "trials", "example error"], failure_rows)}
{_profile_section(profile, out)}
</body></html>
"""
    path = out / "report.html"
    path.write_text(page)
    return path
