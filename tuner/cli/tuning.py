"""``tuner tune`` (a job on this machine) and ``tuner submit`` (a job for the fleet)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated
from typing import Any

import typer

from tuner.app.options import JobOptions
from tuner.app.options import build_spec
from tuner.cli.common import DbOption
from tuner.cli.common import bench_settings
from tuner.cli.common import console
from tuner.cli.common import err
from tuner.cli.common import friendly
from tuner.cli.common import settings_for
from tuner.cli.options import BackendOpt
from tuner.cli.options import BenchMemoryOpt
from tuner.cli.options import CompileProcsOpt
from tuner.cli.options import CompileTimeoutOpt
from tuner.cli.options import ConfirmTopOpt
from tuner.cli.options import DeviceKindOpt
from tuner.cli.options import DevicesOpt
from tuner.cli.options import DtypeOpt
from tuner.cli.options import KernelArg
from tuner.cli.options import KernelOpt
from tuner.cli.options import LookaheadOpt
from tuner.cli.options import MaxAttemptsOpt
from tuner.cli.options import ParallelOpt
from tuner.cli.options import PatienceOpt
from tuner.cli.options import RepOpt
from tuner.cli.options import RunTimeoutOpt
from tuner.cli.options import SamplerOpt
from tuner.cli.options import SeedOpt
from tuner.cli.options import ShapeOpt
from tuner.cli.options import StaticCheckOpt
from tuner.cli.options import TargetOpt
from tuner.cli.options import TimeLimitOpt
from tuner.cli.options import TransferOpt
from tuner.cli.options import TrialsOpt
from tuner.cli.options import WarmupOpt
from tuner.cli.options import pick_kernel
from tuner.core.parsing import UsageError
from tuner.core.settings import Settings
from tuner.core.types import DEFAULT_TRANSFER
from tuner.measure.gpus import parse_devices

MissingOpt = Annotated[Path | None, typer.Option(
    "--missing", help="Tune the shapes production recorded as missing (tuner.autotune(..., "
    "record_missing=True)): one job per kernel and dtype, instead of KERNEL and --shape.",
    show_default=False)]
CapturedOpt = Annotated[Path | None, typer.Option(
    "--captured", help="Tune the kernels a program launched (a file of tuner capture), in "
    "place: one job per kernel and dtype over its captured problems, instead of KERNEL and "
    "--shape.", show_default=False)]
TopOpt = Annotated[int | None, typer.Option(
    "--top", min=1, help="With --captured: the K (kernel, problem) pairs that took most time.",
    show_default=False)]
MinShareOpt = Annotated[float | None, typer.Option(
    "--min-share", min=0.0, max=1.0, help="With --captured: every (kernel, problem) with at "
    "least this share of the kernel time [default: 0.01].", show_default=False)]


def job_groups(kernel: str | None, kernel_option: str | None, shape: list[str] | None,
               dtype: str | None, missing: Path | None, captured: Path | None,
               top: int | None, min_share: float | None) -> list[Any]:
    """The jobs a command line names: KERNEL with --shape, or those --missing or --captured
    list (``UsageError`` when they are mixed)."""
    from tuner.app.missing import MissingGroup
    from tuner.app.missing import missing_groups

    if missing is not None and captured is not None:
        raise UsageError("give --missing or --captured, not both")
    if (top is not None or min_share is not None) and captured is None:
        raise UsageError("--top and --min-share select from a capture: give --captured FILE")
    if top is not None and min_share is not None:
        raise UsageError("give --top or --min-share, not both")
    source = "--missing" if missing is not None else "--captured" if captured else None
    if source is not None and (kernel or kernel_option or shape or dtype):
        raise UsageError(f"{source} names the kernels, shapes and dtypes itself; drop "
                         "KERNEL, --shape and --dtype")
    if missing is not None:
        return list(missing_groups(missing))
    if captured is not None:
        from tuner.app.capture import tune_groups

        return tune_groups(captured, top, min_share)
    return [MissingGroup(pick_kernel(kernel, kernel_option), dtype or "", shape or [])]


@friendly
def tune(
    kernel: KernelArg = None, kernel_option: KernelOpt = None, shape: ShapeOpt = None,
    dtype: DtypeOpt = None,
    backend: BackendOpt = "auto", device_kind: DeviceKindOpt = None, trials: TrialsOpt = 30,
    time_limit: TimeLimitOpt = None, target: TargetOpt = None, patience: PatienceOpt = None,
    sampler: SamplerOpt = "auto", seed: SeedOpt = None, parallel: ParallelOpt = 1,
    compile_timeout: CompileTimeoutOpt = 120, run_timeout: RunTimeoutOpt = 60,
    warmup_ms: WarmupOpt = None, rep_ms: RepOpt = None, static_check: StaticCheckOpt = None,
    confirm_top: ConfirmTopOpt = 3, transfer: TransferOpt = DEFAULT_TRANSFER,
    compile_procs: CompileProcsOpt = None,
    bench_memory: BenchMemoryOpt = None, missing: MissingOpt = None, db: DbOption = None,
    devices: DevicesOpt = None, captured: CapturedOpt = None, top: TopOpt = None,
    min_share: MinShareOpt = None,
) -> None:
    """Tune KERNEL on this machine (blocking, no Redis): --parallel local bench processes.
    Exit status 1 when a problem has no successful trial."""
    settings = bench_settings(db, bench_memory)
    if devices is not None:
        settings = dataclasses.replace(settings, gpus=parse_devices(devices))
        parallel = len(settings.gpus) if parallel == 1 else parallel
    groups = job_groups(kernel, kernel_option, shape, dtype, missing, captured, top, min_share)
    failed = False
    for group in groups:
        options = JobOptions(group.ref, group.shapes, group.dtype or None, backend,
                             device_kind, trials, time_limit, target, patience, sampler, seed,
                             parallel, compile_timeout, run_timeout, warmup_ms, rep_ms,
                             static_check=static_check, confirm_top=confirm_top,
                             transfer=transfer, lookahead=compile_procs)
        failed = _tune_one(options, settings) or failed
    if failed:
        raise typer.Exit(1)  # a problem with no successful trial is a failed tuning run


def _tune_one(options: JobOptions, settings: Settings) -> bool:
    """Run one job and print its summary; True when a problem has no successful trial."""
    from tuner.app.tune import tune as tune_locally
    from tuner.views.terminal import ProgressBars
    from tuner.views.terminal import print_summary

    with ProgressBars(err) as bars:
        run = tune_locally(options, settings, bars.show)
    print_summary(run.summary, settings.db_url, console)
    if run.outcome.interrupted:
        raise typer.Exit(130)
    return run.failed_problems > 0


@friendly
def submit(
    kernel: KernelArg = None, kernel_option: KernelOpt = None, shape: ShapeOpt = None,
    dtype: DtypeOpt = None,
    backend: BackendOpt = "auto", device_kind: DeviceKindOpt = None, trials: TrialsOpt = 30,
    time_limit: TimeLimitOpt = None, target: TargetOpt = None, patience: PatienceOpt = None,
    sampler: SamplerOpt = "auto", seed: SeedOpt = None, parallel: ParallelOpt = 4,
    compile_timeout: CompileTimeoutOpt = 120, run_timeout: RunTimeoutOpt = 60,
    warmup_ms: WarmupOpt = None, rep_ms: RepOpt = None, max_attempts: MaxAttemptsOpt = 3,
    static_check: StaticCheckOpt = None, confirm_top: ConfirmTopOpt = 3,
    transfer: TransferOpt = DEFAULT_TRANSFER, lookahead: LookaheadOpt = None,
    idempotency_key: Annotated[str | None, typer.Option(
        help="Submitting again with the same key returns the same job.")] = None,
    db: DbOption = None, captured: CapturedOpt = None, top: TopOpt = None,
    min_share: MinShareOpt = None,
) -> None:
    """Submit a job to the fleet and print its id at once (schedulers and workers run it);
    with --captured, one job per captured kernel and dtype."""
    from tuner.app.fleet import live_workers
    from tuner.app.fleet import submit_job

    settings = settings_for(db)
    groups = job_groups(kernel, kernel_option, shape, dtype, None, captured, top, min_share)
    for group in groups:
        key = idempotency_key and (idempotency_key if len(groups) == 1
                                   else f"{idempotency_key}:{group.ref}:{group.dtype}")
        options = JobOptions(group.ref, group.shapes, group.dtype or None, backend,
                             device_kind, trials, time_limit, target, patience, sampler, seed,
                             parallel, compile_timeout, run_timeout, warmup_ms, rep_ms,
                             max_attempts, key, static_check, confirm_top, transfer, lookahead)
        spec, spec_kernel = build_spec(options, settings, submit=True)
        created = submit_job(spec, spec_kernel, settings)
        note = " (already submitted with this idempotency key)" if created.existing else ""
        console.print(f"job {created.job_id}{note}: {len(created.study_names)} problem(s) "
                      f"for the {spec.device_kind} queue; follow it with: tuner watch "
                      f"{created.job_id}", highlight=False)
    if live_workers(settings, spec.device_kind) == 0:
        err.print(f"[yellow]warning:[/] no live worker serves {spec.device_kind} yet: the job "
                  "waits until one starts (tuner worker --device cuda:N on a host with that "
                  "GPU, or --device cpu); tuner workers lists them", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(tune)
    app.command()(submit)
