"""Read-only CLI commands: status tables, export, the dashboard, the kernel list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from db import repository as repo
from db.session import DatabaseError
from db.session import check_reachable
from db.session import is_missing_tables
from db.session import make_engine
from db.session import safe_url
from db.session import session_factory
from db.session import sqlite_path
from search_spaces import Param
from tuner.cli_tune import format_config
from tuner.core.settings import Settings
from tuner.export import export_rows
from tuner.export import python_module
from tuner.export import write_export
from tuner.kernels import BUILTIN
from tuner.kernels import KernelError
from tuner.kernels import load_kernel


def open_engine(settings: Settings) -> sa.Engine:
    """An engine on an existing, reachable database (``DatabaseError`` otherwise)."""
    path = sqlite_path(settings.db_url)
    if path is not None and not path.exists():
        raise DatabaseError(f"no database at {path} yet (run `tuner tune …` or "
                            "`tuner db upgrade` first)")
    check_reachable(settings.db_url)
    return make_engine(settings.db_url)


def show_jobs(settings: Settings, limit: int, console: Console) -> None:
    engine = open_engine(settings)
    table = Table("job", "kernel", "dtype", "device", "backend", "status", "problems",
                  "measured", "best fraction", "created (UTC)", header_style="bold")
    try:
        with session_factory(engine)() as session:
            for job in repo.list_jobs(session, limit):
                problems = repo.problems_of(session, job.id)
                fractions = [p.best_fraction for p in problems if p.best_fraction is not None]
                table.add_row(
                    str(job.id), job.kernel, job.dtype, job.device_kind, job.backend[:24],
                    job.status, str(len(problems)), str(sum(p.measured for p in problems)),
                    f"{max(fractions):.4g}" if fractions else "–",
                    job.created_at.strftime("%Y-%m-%d %H:%M:%S"))
    except sa.exc.OperationalError as exc:
        if not is_missing_tables(exc):
            raise
    except sa.exc.ProgrammingError as exc:
        if not is_missing_tables(exc):
            raise
    finally:
        engine.dispose()
    console.print(table)


def show_job(settings: Settings, job_id: int, console: Console) -> None:
    engine = open_engine(settings)
    try:
        with session_factory(engine)() as session:
            job = repo.get_job(session, job_id)
            if job is None:
                raise DatabaseError(f"no job {job_id} in {safe_url(settings.db_url)}")
            console.print(f"[bold]job {job.id}[/]: {job.kernel} {job.dtype} on {job.device_kind} "
                          f"via {job.backend}, sampler {job.sampler}, status {job.status}")
            table = Table("problem", "status", "measured", "best fraction", "best config",
                          "stopped because", "study", header_style="bold")
            for p in repo.problems_of(session, job.id):
                t = repo.get_trial(session, p.best_trial_id) if p.best_trial_id else None
                table.add_row(p.problem_key, p.status, str(p.measured),
                              f"{p.best_fraction:.4g}" if p.best_fraction is not None else "–",
                              format_config(t.config if t else None), p.stop_reason or "",
                              p.study_name)
            console.print(table)
            counts = repo.status_counts(session, job.id)
            console.print("trials by status: " + (", ".join(
                f"{k} {v}" for k, v in sorted(counts.items())) or "none yet"))
    finally:
        engine.dispose()


def _space_defaults(kernels: set[str], settings: Settings) -> dict[str, Any]:
    """Each kernel's fallback config for the lookup's ``default`` tier: its first seed."""
    defaults = {}
    for name in sorted(kernels):
        try:
            seeds = load_kernel(name, settings.kernel_roots).space.seed_configs()
        except KernelError:
            continue
        if seeds:
            defaults[name] = seeds[0]
    return defaults


def export_best(settings: Settings, out: Path, kernel: str | None,
                device_kind: str | None, python: Path | None = None) -> int:
    engine = open_engine(settings)
    try:
        with session_factory(engine)() as session:
            rows = repo.best_configs(session, kernel=kernel, device_kind=device_kind)
            document = export_rows(rows, safe_url(settings.db_url))
    finally:
        engine.dispose()
    document["defaults"] = _space_defaults({e["kernel"] for e in document["configs"]},
                                           settings)
    write_export(document, out)
    if python is not None:
        python.parent.mkdir(parents=True, exist_ok=True)
        python.write_text(python_module(document))
    return len(document["configs"])


def serve_dashboard(settings: Settings, host: str, port: int, err: Console) -> None:
    """Run optuna-dashboard in this process until interrupted."""
    from tuner.optuna.dashboard import serve

    engine = open_engine(settings)
    engine.dispose()
    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print("[yellow]warning:[/] optuna-dashboard has no authentication and can "
                  f"delete studies; it is now reachable on {host}")
    err.print(f"optuna-dashboard for {safe_url(settings.db_url)} on http://{host}:{port}/ "
              "(Ctrl-C to stop)")
    serve(settings.db_url, host, port, settings.artifact_dir)


def _param_text(p: Param) -> str:
    values = [str(v) for v in p.values()]
    text = "{" + ",".join(values) + "}"
    if p.when:
        text += " when " + " and ".join(f"{k} in {{{','.join(map(str, v))}}}"
                                        for k, v in p.when)
    return f"{p.name} ∈ {text}"


def show_kernels(settings: Settings, console: Console) -> None:
    """Every built-in kernel: dims, dtypes, description, parameters and constraints."""
    from tuner.kernels.registry import FAMILIES

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
