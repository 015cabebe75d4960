"""A tuning job as a user asks for it (``JobOptions``, from the CLI or the Python API) and the
``JobSpec`` it becomes, with every choice that depends on this machine made here.

``build_spec`` raises ``UsageError`` (or ``KernelError``) with a one-line message for bad input,
before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.core.devices.datasheets import CPU_KIND
from tuner.core.devices.datasheets import DEVICES
from tuner.core.devices.datasheets import known_kinds
from tuner.core.devices.datasheets import normalise_device_name
from tuner.core.devices.nvidia_smi import gpu_visible
from tuner.core.limits import spec_errors
from tuner.core.parsing import UsageError
from tuner.core.parsing import parse_shape
from tuner.core.settings import Settings
from tuner.core.target import BadTarget
from tuner.core.target import Target
from tuner.core.target import gpu_kinds
from tuner.core.types import DEFAULT_TRANSFER
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.core.types import TimingSettings
from tuner.kernels import KernelSpec
from tuner.kernels import resolve_kernel


@dataclass(frozen=True)
class JobOptions:
    """The options of ``tuner tune``/``tuner submit`` and ``tuner.tune`` (see their help)."""

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
    #: ``tune``: compile processes per GPU (``--compile-procs``); ``submit``: trials per worker
    #: in flight ahead (``--lookahead``); ``None``: the default (``lookahead_for``).
    lookahead: int | None = None


def resolve_backend(text: str) -> Target:
    """``auto`` → ``cuda`` when a GPU is visible, else ``interpret``; others are parsed
    (``UsageError`` for a name that is no target)."""
    if text == "auto":
        text = "cuda" if gpu_visible() else "interpret"
    try:
        return Target.parse(text)
    except BadTarget as exc:
        raise UsageError(str(exc)) from None


def check_device_kind(kind: str, target: Target) -> str:
    if target.is_interpreter and kind != CPU_KIND:
        raise UsageError(f"the interpret backend runs on the host CPU; --device-kind must be "
                         f"'{CPU_KIND}', not {kind!r}")
    if target.is_cuda and kind == CPU_KIND:
        raise UsageError("device kind 'cpu' needs the interpret backend")
    if target.is_cuda and kind not in known_kinds():
        raise UsageError(f"unknown GPU kind {kind!r} (known: {', '.join(gpu_kinds())})")
    return kind


def static_check_for(option: str | None, target: Target, kind: str) -> str | None:
    """``none`` → off; a kind → that kind; unset → the job's GPU kind when it runs on CUDA and
    the device table knows it (``auto`` while the local GPU is not yet detected)."""
    if option is not None:
        return None if option == "none" else option
    if target.is_cuda:
        return (kind if kind in DEVICES else None) if kind else "auto"
    return None


def _timing(target: Target, warmup_ms: float | None, rep_ms: float | None) -> TimingSettings:
    """Interpreter trials take 10–1000 ms per call: no warm-up beyond the first call, and a
    short timing budget; GPU trials use ``do_bench``'s 25 ms / 100 ms."""
    base = TimingSettings(warmup_ms=0.0, rep_ms=200.0, min_reps=3, max_reps=50) \
        if target.is_interpreter else TimingSettings()
    return TimingSettings(warmup_ms=base.warmup_ms if warmup_ms is None else warmup_ms,
                          rep_ms=base.rep_ms if rep_ms is None else rep_ms,
                          min_reps=base.min_reps, max_reps=base.max_reps)


#: Trials per GPU worker a fleet job keeps in flight beyond the one being timed, by default
#: (``tuner submit``): enough for a worker with 2 compile processes (``p + 1``).
FLEET_LOOKAHEAD = 3
#: The most compile processes one GPU may have (``--lookahead`` is bounded at one more).
MAX_COMPILE_PROCS = 63


def lookahead_for(option: int | None, target: Target, parallel: int, *, submit: bool) -> int:
    """Trials per worker in flight beyond the one on its device (``JobSpec.lookahead``).

    ``tune``: the option is ``--compile-procs p`` (default: the cores this host can give each
    GPU) and the lookahead ``p + 1``; ``submit``: the option is ``--lookahead`` itself
    (default ``FLEET_LOOKAHEAD``). Always 0 on backends that do not compile for a GPU."""
    if option is not None and option > 0 and not target.on_gpu:
        flag = "--lookahead" if submit else "--compile-procs"
        raise UsageError(f"{flag} compiles configs ahead for a GPU; the "
                         f"{target.scheme.name} backend does not compile for one")
    if not target.on_gpu:
        return 0
    if submit:
        return FLEET_LOOKAHEAD if option is None else option
    if option is not None and not 0 <= option <= MAX_COMPILE_PROCS:
        raise UsageError(f"--compile-procs must be between 0 and {MAX_COMPILE_PROCS}, "
                         f"not {option}")
    from tuner.measure.pipeline import Pipeline
    from tuner.measure.pipeline import default_compile_procs

    procs = default_compile_procs(gpus=parallel) if option is None else option
    return Pipeline(procs).lookahead


def build_spec(o: JobOptions, settings: Settings, *, submit: bool) -> tuple[JobSpec, KernelSpec]:
    """Resolve the kernel and backend and build the job spec; ``UsageError`` on bad input.

    For a local run an empty device kind on a GPU backend is filled in from the local GPU once
    its bench process is up (``tuner.app.local``); ``submit`` needs it now, since it names the
    queue the fleet's workers listen on.
    """
    if o.backend == "auto" and submit:  # the fleet's GPUs are not visible from here
        target = resolve_backend("cuda" if o.device_kind not in (None, CPU_KIND) else "interpret")
    else:
        target = resolve_backend(o.backend)
    backend = str(target)
    kernel = resolve_kernel(o.kernel, backend, settings.kernel_roots, isolated=True)
    problems = [parse_shape(s, kernel.dims) for s in o.shapes]
    if not problems and target.recording is not None:
        problems = [dict(kernel.example_problem)]
    if target.is_interpreter:
        kind = check_device_kind(o.device_kind or CPU_KIND, target)
    elif target.recording is not None:
        from tuner.kernels.recorded import recording_of

        kind = o.device_kind or normalise_device_name(recording_of(target).device_name)
    elif target.gpu_kind is not None:
        kind = target.gpu_kind
    elif o.device_kind:
        kind = check_device_kind(o.device_kind, target)
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
        parallel=o.parallel, timing=_timing(target, o.warmup_ms, o.rep_ms),
        compile_timeout_s=o.compile_timeout, run_timeout_s=o.run_timeout,
        max_attempts=o.max_attempts, idempotency_key=o.idempotency_key,
        static_check=static_check_for(o.static_check, target, kind),
        confirm_top=o.confirm_top, transfer=o.transfer,
        lookahead=lookahead_for(o.lookahead, target, o.parallel, submit=submit))
    errors = spec_errors(spec)
    if errors:
        raise UsageError("; ".join(errors))
    return spec, kernel
