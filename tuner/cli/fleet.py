"""Fleet commands: ``watch``, ``cancel``, ``workers``, and the ``scheduler`` and ``worker``
processes."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from tuner.cli.common import DbOption
from tuner.cli.common import JsonOption
from tuner.cli.common import bench_settings
from tuner.cli.common import console
from tuner.cli.common import err
from tuner.cli.common import friendly
from tuner.cli.common import settings_for
from tuner.cli.options import BenchMemoryOpt
from tuner.core.limits import MAX_ID
from tuner.core.parsing import UsageError
from tuner.core.target import BadTarget
from tuner.core.target import parse_worker_device


@friendly
def watch(job: Annotated[int, typer.Argument(help="Job id.", min=1, max=MAX_ID)],
          db: DbOption = None) -> None:
    """Follow a job live until it ends."""
    from tuner.app.fleet import watch_job
    from tuner.views.terminal import ProgressBars

    with ProgressBars(err) as bars:
        status = watch_job(settings_for(db), job, bars.show)
    console.print(f"job {job} {status}")


@friendly
def cancel(job: Annotated[int, typer.Argument(help="Job id.", min=1, max=MAX_ID)],
           db: DbOption = None) -> None:
    """Cancel a job: queued trials never run; running ones finish and are kept."""
    from tuner.app.fleet import cancel_job

    outcome = cancel_job(settings_for(db), job)
    if outcome.already is not None:
        console.print(f"job {job} already {outcome.already}")
    else:
        console.print(f"job {job} cancelled: {outcome.queued} queued trial(s) will not run; "
                      "running ones finish and are kept")


@friendly
def workers(as_json: JsonOption = False, db: DbOption = None) -> None:
    """List the fleet's workers: device, queue, last heartbeat, trials done."""
    from dataclasses import asdict

    from tuner.app.fleet import fleet_workers

    if as_json:
        console.out(json.dumps([asdict(w) for w in fleet_workers(settings_for(db))], indent=1))
        return
    table = Table("worker", "device", "kind", "queue", "status", "last heartbeat", "trials",
                  "bandwidth GB/s", header_style="bold")
    for w in fleet_workers(settings_for(db)):
        table.add_row(w.name, f"{w.device} {w.device_name}", w.device_kind,
                      ",".join(w.queues), w.state, f"{w.heartbeat_age_s:.0f} s ago",
                      str(w.trials_done), f"{w.bandwidth_gbps:.0f}")
    console.print(table)


@friendly
def scheduler(
    poll: Annotated[float, typer.Option(help="Seconds between rounds when idle.")] = 0.5,
    db: DbOption = None,
) -> None:
    """Drive every submitted job (several schedulers may run; each job has one driver)."""
    from tuner.app.fleet import run_scheduler

    run_scheduler(settings_for(db), poll, lambda line: err.print(line, highlight=False))


@friendly
def worker(
    device: Annotated[str, typer.Option(
        help="cuda:N (one worker per GPU) or cpu; standin:<gpu kind> is a simulated GPU (real "
             "compiles, device time held by a sleep) for trying the fleet without one.")] = "cpu",
    name: Annotated[str | None, typer.Option(
        help="Node name (default device.pid.tag@host, the tag random).")] = None,
    queue: Annotated[str | None, typer.Option(
        help="Queue to consume (default bench.<gpu kind>, or cpu).")] = None,
    compile_procs: Annotated[int | None, typer.Option(
        help="CPU processes that compile the next configs for this GPU while one is timed "
             "(the GPU never waits for a compile; jobs keep --lookahead configs per worker "
             "in flight for them). 0: compile on the device, serially. Default: the host's "
             "cores per GPU less one, at most 8.", show_default=False)] = None,
    bench_memory: BenchMemoryOpt = None,
    db: DbOption = None,
) -> None:
    """Run a Celery worker for one GPU (or the CPU queue); it owns an isolated bench process
    and, on a GPU, a pool of compile processes."""
    from tuner.app.fleet import compile_procs_for
    from tuner.app.fleet import run_worker
    from tuner.app.options import MAX_COMPILE_PROCS

    try:
        target = parse_worker_device(device)
    except BadTarget as exc:
        raise UsageError(str(exc)) from None
    if compile_procs is not None and not 0 <= compile_procs <= MAX_COMPILE_PROCS:
        raise UsageError(f"--compile-procs must be between 0 and {MAX_COMPILE_PROCS}, not "
                         f"{compile_procs}")
    if target.is_interpreter and compile_procs:
        raise UsageError("--compile-procs compiles ahead for a GPU; the cpu worker runs the "
                         "interpreter, which does not compile")
    procs = compile_procs_for(device, compile_procs)
    settings = bench_settings(db, bench_memory)
    err.print(f"worker on {device}: probing the device…"
              + (f" (compile processes: {procs})" if procs else ""))
    status = run_worker(settings, device, name, queue, compile_procs=procs)
    if status:
        raise typer.Exit(status)


def register(app: typer.Typer) -> None:
    for command in (watch, cancel, workers, scheduler, worker):
        app.command()(command)
