"""Options shared by ``tuner tune`` and ``tuner submit``, and the job spec they build."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from tuner.cli_args import UsageError
from tuner.cli_args import check_device_kind
from tuner.cli_args import parse_shape
from tuner.cli_args import resolve_backend
from tuner.core.devices import CPU_KIND
from tuner.core.devices import DEVICES
from tuner.core.devices import normalise_device_name
from tuner.core.settings import Settings
from tuner.core.types import DEFAULT_TRANSFER
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.core.types import TimingSettings
from tuner.kernels import BUILTIN
from tuner.kernels import KernelSpec
from tuner.kernels import resolve_kernel

KernelArg = Annotated[str | None, typer.Argument(
    help=f"Kernel to tune: {', '.join(BUILTIN)}, matmul+bias+gelu+residual (any epilogue), "
         "path/to/module.py:NAME (your own; see `tuner kernels`), or 'replay' with "
         "--backend replay:<file>.", show_default=False)]
KernelOpt = Annotated[str | None, typer.Option(
    "--kernel", "-k", help="The kernel, as an option: e.g. --kernel my_kernels.py:SPEC.",
    show_default=False)]


def pick_kernel(argument: str | None, option: str | None) -> str:
    """The kernel named by the argument or by --kernel (not two different ones)."""
    if argument and option and argument != option:
        raise UsageError(f"two kernels given: {argument!r} and --kernel {option!r}")
    ref = argument or option
    if not ref:
        raise UsageError("name the kernel to tune, e.g. `tuner tune matmul` or "
                         "`tuner tune --kernel path/to/module.py:NAME` (list: tuner kernels)")
    return ref
ShapeOpt = Annotated[list[str] | None, typer.Option(
    "--shape", "-s", help="Problem size, e.g. M=512,N=512,K=512 or 512x512x512. Repeat for "
                          "several problems.")]
DtypeOpt = Annotated[str | None, typer.Option(
    help="Input dtype (fp32, fp16, bf16…); default: the kernel's first.")]
BackendOpt = Annotated[str, typer.Option(
    help="auto (cuda if a GPU is visible, else interpret), interpret, cuda, cuda:N, "
         "replay:<kernel tuner cache file>, model:<gpu kind> (a prediction, never stored as "
         "a best config).")]
DeviceKindOpt = Annotated[str | None, typer.Option(
    "--device-kind", "--gpu", help="Device kind: constraints, roofline and (submit) the "
                                   "worker queue, e.g. h100-sxm. Detected by tune.")]
TrialsOpt = Annotated[int, typer.Option(help="Measured configs per problem.")]
TimeLimitOpt = Annotated[float | None, typer.Option(help="Seconds per problem before stopping.")]
TargetOpt = Annotated[float | None, typer.Option(
    help="Stop a problem once this roofline fraction is reached.")]
PatienceOpt = Annotated[int | None, typer.Option(
    help="Stop after this many measured trials without a new best.")]
SamplerOpt = Annotated[str, typer.Option(
    help="auto (model-guided, constraint-aware, never repeats: the default), or Optuna's tpe, "
         "random or grid.")]
SeedOpt = Annotated[int | None, typer.Option(help="Sampler and input seed.")]
ParallelOpt = Annotated[int, typer.Option(help="Trials in flight at once.")]
CompileTimeoutOpt = Annotated[float, typer.Option(help="Seconds for compile + first call.")]
RunTimeoutOpt = Annotated[float, typer.Option(help="Seconds for check + timing.")]
WarmupOpt = Annotated[float | None, typer.Option(help="Warm-up time budget per trial (ms).")]
RepOpt = Annotated[float | None, typer.Option(help="Timing budget per trial (ms).")]
StaticCheckOpt = Annotated[str | None, typer.Option(
    help="Compile each config for this GPU kind before measuring it and skip configs that "
         "cannot launch or spill (default: the job's GPU kind on cuda; 'none' turns it off).")]
ConfirmTopOpt = Annotated[int, typer.Option(
    help="Re-time this many of the best configs interleaved before declaring the winner "
         "(0: no confirmation).")]
TransferOpt = Annotated[int, typer.Option(
    help="Measure first the best stored configs of this kernel and dtype on up to this many "
         "related problems (same GPU kind first, then the nearest shape; --sampler auto only; "
         "0: off).")]
MaxAttemptsOpt = Annotated[int, typer.Option(
    help="Deliveries of a trial before it is marked lost (its worker vanished each time).")]


@dataclass(frozen=True)
class JobOptions:
    kernel: str
    shapes: list[str]
    dtype: str | None
    backend: str
    device_kind: str | None
    trials: int
    time_limit: float | None
    target: float | None
    patience: int | None
    sampler: str
    seed: int | None
    parallel: int
    compile_timeout: float
    run_timeout: float
    warmup_ms: float | None
    rep_ms: float | None
    max_attempts: int = 3
    idempotency_key: str | None = None
    static_check: str | None = None
    confirm_top: int = 3
    transfer: int = DEFAULT_TRANSFER


def static_check_for(option: str | None, backend: str, kind: str) -> str | None:
    """``none`` → off; a kind → that kind; unset → the job's GPU kind when it runs on CUDA and
    the device table knows it (``auto`` while the local GPU is not yet detected)."""
    if option is not None:
        return None if option == "none" else option
    if backend == "cuda" or backend.startswith("cuda:"):
        return (kind if kind in DEVICES else None) if kind else "auto"
    return None


def _timing(backend: str, warmup_ms: float | None, rep_ms: float | None) -> TimingSettings:
    """Interpreter trials take 10–1000 ms per call: no warm-up beyond the first call, and a
    short timing budget; GPU trials use ``do_bench``'s 25 ms / 100 ms."""
    base = TimingSettings(warmup_ms=0.0, rep_ms=200.0, min_reps=3, max_reps=50) \
        if backend == "interpret" else TimingSettings()
    return TimingSettings(warmup_ms=base.warmup_ms if warmup_ms is None else warmup_ms,
                          rep_ms=base.rep_ms if rep_ms is None else rep_ms,
                          min_reps=base.min_reps, max_reps=base.max_reps)


def build_spec(o: JobOptions, settings: Settings, *, submit: bool) -> tuple[JobSpec, KernelSpec]:
    """Resolve the kernel and backend and build the job spec; ``UsageError`` on bad input.

    For ``tune`` an empty device kind on a GPU backend is filled in from the local GPU later;
    ``submit`` needs it now, since it names the queue the fleet's workers listen on.
    """
    if o.backend == "auto" and submit:  # the fleet's GPUs are not visible from here
        backend = "cuda" if o.device_kind not in (None, CPU_KIND) else "interpret"
    else:
        backend = resolve_backend(o.backend)
    kernel = resolve_kernel(o.kernel, backend, settings.kernel_roots)
    problems = [parse_shape(s, kernel.dims) for s in o.shapes]
    if not problems and backend.startswith("replay:"):
        problems = [dict(kernel.example_problem)]
    if backend == "interpret":
        kind = check_device_kind(o.device_kind or CPU_KIND, backend)
    elif backend.startswith("replay:"):
        from tuner.kernels.recorded import recording_of

        kind = o.device_kind or normalise_device_name(recording_of(backend).device_name)
    elif backend.startswith("model:"):
        kind = backend.split(":", 1)[1]
    elif o.device_kind:
        kind = check_device_kind(o.device_kind, backend)
    elif submit:
        raise UsageError("submitting a GPU job needs --device-kind (e.g. h100-sxm): it names "
                         "the queue of the workers that will run it")
    else:
        kind = ""
    spec = JobSpec(
        kernel=o.kernel, problems=problems, dtype=o.dtype or kernel.dtypes[0], backend=backend,
        device_kind=kind, sampler=o.sampler, seed=o.seed,
        budget=Budget(trials=o.trials, wall_s=o.time_limit, target_fraction=o.target,
                      patience=o.patience),
        parallel=o.parallel, timing=_timing(backend, o.warmup_ms, o.rep_ms),
        compile_timeout_s=o.compile_timeout, run_timeout_s=o.run_timeout,
        max_attempts=o.max_attempts, idempotency_key=o.idempotency_key,
        static_check=static_check_for(o.static_check, backend, kind),
        confirm_top=o.confirm_top, transfer=o.transfer)
    return spec, kernel
