"""The options of ``tuner tune`` and ``tuner submit`` (and ``tuner plan --submit``), as typer
annotations, and the choice of the kernel between the argument and ``--kernel``."""

from __future__ import annotations

from typing import Annotated

import typer

from tuner.core.parsing import UsageError
from tuner.kernels import BUILTIN

KernelArg = Annotated[str | None, typer.Argument(
    help=f"Kernel to tune: {', '.join(BUILTIN)}, matmul+bias+gelu+residual (any epilogue), "
         "path/to/module.py:NAME (your own; see `tuner kernels`), or 'replay' with "
         "--backend replay:<file>.", show_default=False)]
KernelOpt = Annotated[str | None, typer.Option(
    "--kernel", "-k", help="The kernel, as an option: e.g. --kernel my_kernels.py:SPEC.",
    show_default=False)]
ShapeOpt = Annotated[list[str] | None, typer.Option(
    "--shape", "-s", help="Problem size, e.g. M=512,N=512,K=512 or 512x512x512. Repeat for "
                          "several problems.")]
DtypeOpt = Annotated[str | None, typer.Option(
    help="Input dtype (fp32, fp16, bf16…); default: the kernel's first.")]
BackendOpt = Annotated[str, typer.Option(
    help="auto (cuda if a GPU is visible, else interpret), interpret, cuda, cuda:N, "
         "replay:<kernel tuner cache file>, model:<gpu kind> (a prediction, never stored as "
         "a best config), standin:<gpu kind> (a simulated GPU: real compiles for it, device "
         "time held by a sleep, model times; to try the compile pipeline without a GPU; "
         "never stored as a best config).")]
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
         "random, grid or gp (GPSampler).")]
SeedOpt = Annotated[int | None, typer.Option(help="Sampler and input seed.")]
ParallelOpt = Annotated[int, typer.Option(
    help="Trials in flight at once: local bench processes (on --backend cuda, one per GPU).")]
DevicesOpt = Annotated[str | None, typer.Option(
    "--devices", help="GPUs to time on with --backend cuda, one bench process each, e.g. "
    "0,2,5 (default: cuda:0 … cuda:N-1 for --parallel N).", show_default=False)]
CompileTimeoutOpt = Annotated[float, typer.Option(help="Seconds for compile + first call.")]
RunTimeoutOpt = Annotated[float, typer.Option(help="Seconds for check + timing.")]
BenchMemoryOpt = Annotated[float | None, typer.Option(
    help="Host memory (GiB) one bench process may use; above it the process is killed and "
         "the trial is out_of_resources (default: TUNER_BENCH_MEMORY_GB, or half the RAM).")]
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
         "related problems (same GPU kind first, then the nearest shape), and start from this "
         "problem's results on other GPU kinds (--sampler auto only; 0: off).")]
CompileProcsOpt = Annotated[int | None, typer.Option(
    help="CPU processes per GPU that compile the next configs while one is timed, so the GPU "
         "never waits for a compile (0: compile on the device, serially; default: the cores "
         "per GPU less one, at most 8). GPU backends only.", show_default=False)]
LookaheadOpt = Annotated[int | None, typer.Option(
    help="Trials per GPU worker kept in flight beyond the one being timed, for the workers' "
         "compile pools to compile ahead: their --compile-procs + 1 (default 3 on GPUs; "
         "0: serial).", show_default=False)]
MaxAttemptsOpt = Annotated[int, typer.Option(
    help="Deliveries of a trial before it is marked lost (its worker vanished each time).")]


def pick_kernel(argument: str | None, option: str | None) -> str:
    """The kernel named by the argument or by --kernel (not two different ones)."""
    if argument and option and argument != option:
        raise UsageError(f"two kernels given: {argument!r} and --kernel {option!r}")
    ref = argument or option
    if not ref:
        raise UsageError("name the kernel to tune, e.g. `tuner tune matmul` or "
                         "`tuner tune --kernel path/to/module.py:NAME` (list: tuner kernels)")
    return ref
