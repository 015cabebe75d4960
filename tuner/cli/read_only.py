"""Read-only commands: ``status`` (jobs and their problems), ``kernels`` (what can be tuned)
and ``dashboard`` (optuna-dashboard on the service database)."""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from search_spaces import Param
from tuner.cli.common import DbOption
from tuner.cli.common import JsonOption
from tuner.cli.common import console
from tuner.cli.common import err
from tuner.cli.common import friendly
from tuner.cli.common import settings_for
from tuner.core.limits import MAX_ID
from tuner.core.parsing import UsageError
from tuner.core.target import as_target
from tuner.views.jobs import prior_text
from tuner.views.progress import config_text
from tuner.views.terminal import device_time_lines
from tuner.views.terminal import phase_table


@friendly
def status(
    job: Annotated[int | None, typer.Argument(help="Job id (default: list recent jobs).",
                                              min=1, max=MAX_ID)] = None,
    limit: Annotated[int, typer.Option(help="Jobs to list.", min=1, max=10_000)] = 20,
    trials: Annotated[bool, typer.Option(
        "--trials", help="With JOB: also list every trial's phases (queue wait, compile, "
        "cache hit, device wait, check, timing seconds).")] = False,
    last: Annotated[bool, typer.Option(
        "--last", help="Show the most recent job (the one you just ran), as JOB would.")] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Show recent jobs, or one job's problems, trial statuses and device time (GPU-seconds,
    busy fraction, median seconds per phase)."""
    from tuner.views.jobs import job_summary
    from tuner.views.jobs import recent_jobs
    from tuner.views.jobs import summary_json

    settings = settings_for(db)
    if last:
        if job is not None:
            raise UsageError("give JOB or --last, not both")
        newest = recent_jobs(settings, 1)
        if not newest:
            raise UsageError("no job yet: tuner tune … starts one")
        job = newest[0].job.id
    if as_json:
        found = [job_summary(settings, job)] if job is not None else \
            recent_jobs(settings, limit)
        console.out(json.dumps([summary_json(s) for s in found], indent=1))
        return
    if job is None:
        table = Table("job", "kernel", "dtype", "device", "backend", "status", "problems",
                      "measured", "best fraction", "created (UTC)", header_style="bold")
        for s in recent_jobs(settings, limit):
            j = s.job
            table.add_row(
                str(j.id), j.kernel, j.dtype, j.device_kind, _backend_cell(j.backend), j.status,
                str(len(s.problems)), str(s.measured), _fraction(s.best_fraction, j.backend),
                j.created_at.strftime("%Y-%m-%d %H:%M:%S"))
        console.print(table)
        return
    summary = job_summary(settings, job)
    j = summary.job
    console.print(f"[bold]job {j.id}[/]: {j.kernel} {j.dtype} on {j.device_kind} "
                  f"via {j.backend}, sampler {j.sampler}, status {j.status}")
    table = Table("problem", "status", "measured", "best fraction", "best config",
                  "stopped because", "study", header_style="bold")
    for view in summary.problems:
        p = view.problem
        table.add_row(p.problem_key, p.status, str(p.measured),
                      _fraction(p.best_fraction, j.backend),
                      config_text(view.best.config if view.best else None),
                      p.stop_reason or "", p.study_name)
    console.print(table)
    for view in summary.problems:
        console.print(f"{view.problem.problem_key}: started from "
                      f"{escape(prior_text(view.problem.prior))}", highlight=False)
        if view.best is None and view.failure is not None:
            text, n, total = view.failure
            console.print(f"{view.problem.problem_key}: no config succeeded; {n} of {total} "
                          f"failed with {text}", highlight=False)
    console.print("trials by status: " + (", ".join(
        f"{k} {v}" for k, v in sorted(summary.counts.items())) or "none yet"))
    if summary.device_time is not None:
        for line in device_time_lines(summary.device_time):
            console.print(line, highlight=False)
    if trials:
        console.print(phase_table(summary.phases))


def _fraction(value: float | None, backend: str) -> str:
    """A best fraction, marked when it is no measurement (``standin:``, ``model:``)."""
    if value is None:
        return "–"
    return f"{value:.4g}{as_target(backend).mark}"


def _param_text(p: Param) -> str:
    values = [str(v) for v in p.values()]
    text = "{" + ",".join(values) + "}"
    if p.when:
        text += " when " + " and ".join(f"{k} in {{{','.join(map(str, v))}}}"
                                        for k, v in p.when)
    return f"{p.name} ∈ {text}"


@friendly
def kernels(
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List the kernels that can be tuned, with the parameters of each space."""
    from tuner.kernels import BUILTIN
    from tuner.kernels import load_kernel
    from tuner.kernels.registry import FAMILIES

    settings = settings_for(db)
    if as_json:
        specs = [load_kernel(name, settings.kernel_roots) for name in BUILTIN]
        console.out(json.dumps([{
            "name": k.name, "description": k.description, "dims": list(k.dims),
            "dtypes": list(k.dtypes), "space_size": k.space.size(),
            "params": [_param_text(p) for p in k.space.params],
            "constraints": sorted({c.name for c in k.space.constraints})} for k in specs]
            + [{"name": pattern, "description": text} for pattern, text in FAMILIES.items()],
            indent=1))
        return
    for name in BUILTIN:
        spec = load_kernel(name, settings.kernel_roots)
        console.print(f"[bold]{spec.name}[/]  [dim]dims[/] {','.join(spec.dims)}  "
                      f"[dim]dtypes[/] {', '.join(spec.dtypes)}  "
                      f"[dim]space size[/] {spec.space.size()}", highlight=False)
        console.print(f"  {spec.description}", highlight=False)
        for p in spec.space.params:
            console.print(f"    {_param_text(p)}", highlight=False)
        names = sorted({c.name for c in spec.space.constraints})
        console.print(f"  [dim]constraints:[/] {', '.join(names)}", highlight=False)
    for pattern, text in FAMILIES.items():
        console.print(f"[bold]{escape(pattern)}[/]  {text} (the matmul space)", highlight=False)
    console.print("Your own kernel: tuner tune --kernel path/to/module.py:NAME (see README).")


@friendly
def dashboard(
    host: Annotated[str, typer.Option(
        help="Bind address (keep it local: the dashboard has no auth).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.", min=1, max=65_535)] = 8080,
    allow_writes: Annotated[bool, typer.Option(
        "--allow-writes", help="Let the dashboard delete studies and edit trials (it has no "
        "authentication; read-only by default).")] = False,
    db: DbOption = None,
) -> None:
    """Serve optuna-dashboard on the service database (every job's studies), read-only."""
    from db.session import safe_url
    from tuner.optuna.dashboard import serve
    from tuner.views.jobs import open_engine

    settings = settings_for(db)
    open_engine(settings).dispose()  # one line when there is no database yet
    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print("[yellow]warning:[/] optuna-dashboard has no authentication; it is now "
                  f"reachable on {host}" + (" and can delete studies" if allow_writes else ""))
    err.print(f"optuna-dashboard for {safe_url(settings.db_url)} on http://{host}:{port}/ "
              "(Ctrl-C to stop)")
    try:
        serve(settings.db_url, host, port, settings.artifact_dir, allow_writes)
    except OSError as exc:  # the port is taken, or the address is not this host's
        raise UsageError(f"cannot serve on {host}:{port}: {exc.strerror or exc} (another "
                         "dashboard? choose one with --port)") from None


def register(app: typer.Typer) -> None:
    for command in (status, kernels, dashboard):
        app.command()(command)


def _backend_cell(backend: str) -> str:
    """A job's backend in the jobs table: a replayed recording by its file name (two recordings
    in one folder differ only at the end of the path), anything else cut at 24 characters."""
    target = as_target(backend)
    if target.recording is not None:
        return f"{target.scheme.name}:{PurePath(target.recording).name}"
    return backend[:24]
