"""Into production: ``best`` (the config to use), ``export`` (a self-contained file),
``report`` (what happened in a job) and ``revalidate`` (do the stored winners still hold)."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated
from typing import Any

import typer
from rich.table import Table

from tuner.cli.common import DbOption
from tuner.cli.common import DeviceKindFilter
from tuner.cli.common import JsonOption
from tuner.cli.common import KernelFilter
from tuner.cli.common import console
from tuner.cli.common import err
from tuner.cli.common import friendly
from tuner.cli.common import settings_for
from tuner.core.limits import MAX_ID
from tuner.core.parsing import UsageError
from tuner.core.parsing import parse_shape
from tuner.core.settings import Settings


@dataclass(frozen=True)
class _Question:
    """What ``tuner best`` was asked, checked: the stored kernel name, the problem (dims in
    declared order), the kernel's identity (a file kernel's; None otherwise) and its dtypes
    (None: a name tuned elsewhere, whose dtypes only the source knows)."""

    name: str
    problem: dict[str, int]
    identity: str | None
    dtypes: tuple[str, ...] | None


#: Largest size a lookup by a stored kernel's name accepts: a lookup allocates nothing, so any
#: size a job stored (a replayed recording's problem, pnpoly's 20000000 points) is served.
LOOKUP_MAX_DIM = 1 << 62


def _question(kernel: str, shape: str, settings: Settings) -> _Question:
    """The checked question (``UsageError`` for a bad shape, as ``tuner tune`` checks it).

    A built-in is checked against its signature (``tuner.kernels.names``: no torch import);
    a ``path.py:NAME`` kernel is described in a sandboxed child; another name (a kernel tuned
    elsewhere, a replayed recording) gets positive sizes of at most ``LOOKUP_MAX_DIM``."""
    from tuner.kernels.names import builtin_signature
    from tuner.kernels.names import is_file_ref
    from tuner.kernels.spec import dimension_errors

    signature = builtin_signature(kernel)
    if signature is not None:
        dims, dtypes = signature
        problem = parse_shape(shape, list(dims))
        errors = dimension_errors(problem, dims)
        if errors:
            raise UsageError(f"bad shape {shape!r} for {kernel}: {'; '.join(errors)}")
        return _Question(kernel, {d: problem[d] for d in dims}, None, dtypes)
    if not is_file_ref(kernel):
        problem = parse_shape(shape, [])
        errors = dimension_errors(problem, None, max_dim=LOOKUP_MAX_DIM)
        if errors:
            raise UsageError(f"bad shape {shape!r}: {'; '.join(errors)}")
        return _Question(kernel, problem, None, None)
    from tuner.kernels import KernelError
    from tuner.kernels import resolve_kernel

    try:
        spec = resolve_kernel(kernel, "interpret", settings.kernel_roots, isolated=True)
    except KernelError as exc:
        raise UsageError(str(exc)) from None
    problem = parse_shape(shape, spec.dims)
    errors = spec.problem_errors(problem)
    if errors:
        raise UsageError(f"bad shape {shape!r} for {spec.name}: {'; '.join(errors)}")
    return _Question(spec.name, spec.canonical_problem(problem), spec.identity,
                     tuple(spec.dtypes))


def _check_against_source(question: _Question, dtype: str, device_kind: str | None,
                          src: str, shown: str) -> None:
    """``UsageError`` for a dtype the kernel does not have, a kernel that is neither built
    in nor stored in ``src``, or a device kind nobody knows. Unreadable sources are left to
    the lookup, which says so."""
    from search_spaces import DTYPE_BYTES
    from tuner.core.devices.datasheets import CPU_KIND
    from tuner.core.devices.datasheets import DEVICES
    from tuner.serving.lookup import ANY_DEVICE
    from tuner.serving.lookup import stored_keys

    dtypes = question.dtypes or tuple(DTYPE_BYTES)
    if dtype not in dtypes:
        raise UsageError(f"unknown dtype {dtype!r} for {question.name} (choose from "
                         f"{', '.join(dtypes)})")
    try:
        keys = stored_keys(src)
    except Exception:
        return
    if question.dtypes is None and not any(k == question.name for k, _, _ in keys):
        raise UsageError(f"unknown kernel {question.name!r}: not a built-in (tuner kernels "
                         "lists them), not path/to/module.py:NAME, and nothing is stored under "
                         f"that name in {shown}")
    known = {ANY_DEVICE, CPU_KIND, *DEVICES, *(kind for _, _, kind in keys)}
    if device_kind is not None and device_kind not in known:
        raise UsageError(f"unknown device kind {device_kind!r} (known: "
                         f"{', '.join(sorted(known))})")


def _problem_of_name(ref: str, settings: Settings) -> str:
    """The stored name of a ``path.py:NAME`` kernel (described in a sandboxed child); other
    references are names already."""
    from tuner.kernels import KernelError
    from tuner.kernels import resolve_kernel
    from tuner.kernels.names import is_file_ref

    if not is_file_ref(ref):
        return ref
    try:
        return resolve_kernel(ref, "interpret", settings.kernel_roots, isolated=True).name
    except KernelError as exc:
        raise UsageError(str(exc)) from None


@friendly
def best(
    kernel: Annotated[str | None, typer.Argument(
        help="Kernel: a built-in name, path/to/module.py:NAME, or the name it was stored "
             "under.", show_default=False)] = None,
    shape: Annotated[str, typer.Option("--shape", "-s", help="Problem, e.g. M=512,N=512,K=512.",
                                       show_default=False)] = "",
    dtype: Annotated[str, typer.Option(help="Input dtype.", show_default=False)] = "",
    kernel_opt: Annotated[str | None, typer.Option(
        "--kernel", "-k", help="The kernel, as an option (same as the argument).",
        show_default=False)] = None,
    device_kind: Annotated[str | None, typer.Option(
        "--device-kind", "--gpu", help="Device kind the config is for (default: this "
        "machine's device); 'any' accepts a config tuned on another kind and says so.",
        show_default=False)] = None,
    source: Annotated[str | None, typer.Option(
        help="Exported JSON file or database URL (default: $TUNER_BEST_CONFIGS, else the "
             "service database).", show_default=False)] = None,
    db: DbOption = None,
) -> None:
    """Print the config to use for a kernel, problem and dtype as JSON; the tier that served
    it (exact, bucket, nearest, default), the device kind and any staleness go to stderr.
    Exit status 1 when nothing is tuned for it, 2 on bad input or an unreadable source."""
    from db.session import safe_url
    from tuner.core.devices.local import local_device_kind
    from tuner.serving.lookup import best_config
    from tuner.serving.lookup import default_source
    from tuner.serving.lookup import malformed
    from tuner.serving.lookup import source_error

    ref = kernel_opt or kernel
    if ref is None or (kernel_opt and kernel and kernel_opt != kernel):
        raise UsageError("name one kernel: tuner best KERNEL --shape … --dtype …")
    if not shape or not dtype:
        raise UsageError("--shape and --dtype are required, e.g. tuner best matmul "
                         "--shape M=512,N=512,K=512 --dtype fp16")
    settings = settings_for(db)
    question = _question(ref, shape, settings)
    name = question.name
    src = source or (settings.db_url if db else default_source())
    if "://" not in src and not Path(src).is_file():
        raise UsageError(f"no such export file: {src}")
    shown = safe_url(src) if "://" in src else src
    kind = device_kind.strip().lower() if device_kind else None  # CPU, H100-SXM: as stored
    _check_against_source(question, dtype, kind, src, shown)
    with warnings.catch_warnings():  # an unreadable source is this command's error line
        warnings.simplefilter("ignore", RuntimeWarning)
        config = best_config(name, question.problem, dtype, kind, source=src,
                             identity=question.identity)
    if source_error(src):
        raise UsageError(f"cannot read tuned configs from {shown}: {source_error(src)}")
    if malformed(src):
        err.print(f"warning: {malformed(src)} malformed entries of {src} ignored",
                  highlight=False)
    where = kind or local_device_kind()
    if config is None or config.tier == "default":  # a default is not a tuned config
        err.print(f"no tuned config for {name} {shape} {dtype} on {where}"
                  + ("" if kind else " (this machine; --device-kind any accepts "
                                     "configs tuned on other devices)"), highlight=False)
        if config is not None:
            err.print(f"the export's default config for {name} (the kernel's own, not tuned) "
                      f"is {json.dumps(dict(config))}", highlight=False)
        raise typer.Exit(1)
    tuned = ",".join(f"{k}={v}" for k, v in (config.problem or {}).items())
    err.print(f"tier {config.tier}" + (f" (tuned for {tuned} on {config.device_kind})"
                                       if config.problem else "")
              + (f"; stale: {', '.join(config.stale_reasons)}" if config.stale else ""),
              highlight=False)
    console.print_json(json.dumps(config))


@friendly
def export(
    out: Annotated[Path, typer.Option("--out", "-o", help="JSON file to write.")] = Path(
        "best_configs.json"),
    kernel: KernelFilter = None,
    device_kind: DeviceKindFilter = None,
    python: Annotated[Path | None, typer.Option(
        "--python", help="Also write them as a self-contained Python module.")] = None,
    format_: Annotated[str, typer.Option(
        "--format", help="json: one export file (tuner best, tuner.autotune read it); "
        "vllm-moe: the fused_moe configs as vLLM/SGLang config files "
        "(E=…,N=…,device_name=….json), into the folder --out names.")] = "json",
    db: DbOption = None,
) -> None:
    """Write the best configs to a self-contained JSON file (and a Python module) for
    production lookup, or as vLLM/SGLang fused-MoE config files."""
    from tuner.views.jobs import export_best

    settings = settings_for(db)
    if format_ not in ("json", "vllm-moe"):
        raise UsageError(f"unknown --format {format_!r} (json or vllm-moe)")
    if format_ == "vllm-moe":
        from tuner.views.jobs import export_vllm_moe

        if kernel is not None or python is not None:
            raise UsageError("--format vllm-moe writes the fused_moe configs only: drop "
                             "--kernel and --python")
        folder = out if out != Path("best_configs.json") else Path("moe_configs")
        try:
            files = export_vllm_moe(settings, folder, device_kind)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if not files:
            raise UsageError("no fused_moe best config is stored (tuner tune fused_moe "
                             "--shape M=…,E=…,N=…,K=…,topk=…)")
        for path in files:
            console.print(f"wrote {path}", highlight=False)
        return
    if kernel is not None:
        kernel = _problem_of_name(kernel, settings)
    n = export_best(settings, out, kernel, device_kind, python)
    console.print(f"wrote {n} best config(s) to {out}" + (f" and {python}" if python else ""))


@friendly
def report(
    job: Annotated[int, typer.Argument(help="Job id.", min=1, max=MAX_ID)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into.")] =
    Path("report"),
    profile: Annotated[Path | None, typer.Option(
        help="A profile (tuner profile --out x.json) whose roofline chart to include.")]
    = None,
    db: DbOption = None,
) -> None:
    """Write an HTML report of a job (roofline of every trial, best configs, failures by
    status, search history, device time and its timeline) with its PNG charts."""
    from db.session import session_factory
    from tuner.views.jobs import open_engine
    from tuner.views.report import build_report

    settings = settings_for(db)
    engine = open_engine(settings)
    try:
        if profile is not None and not profile.is_file():
            raise UsageError(f"no such profile: {profile}")
        path = build_report(session_factory(engine), job, out, profile)
    except LookupError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
    finally:
        engine.dispose()
    charts = ", ".join(sorted(p.name for p in path.parent.glob("*.png")))
    console.print(f"wrote {path} (and {charts} beside it)")


@friendly
def revalidate(
    kernel: KernelFilter = None,
    device_kind: DeviceKindFilter = None,
    threshold: Annotated[float, typer.Option(
        help="Smallest relative change reported (noise floor; 3·cv if larger).")] = 0.05,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Re-measure stored best configs on this machine (e.g. after a Triton or driver
    upgrade) and report regressions beyond noise; exit status 1 if any regressed."""
    from rich.progress import Progress

    from tuner.app.revalidate import revalidate as run

    settings = settings_for(db)
    if kernel is not None:
        kernel = _problem_of_name(kernel, settings)
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("re-measuring stored winners", total=None)

        def step(done: int, total: int, result: Any) -> None:
            progress.update(task, completed=done, total=total,
                            description=f"re-measured {result.kernel} {result.problem_key}")

        results = run(settings, kernel, device_kind, threshold, step)
    if as_json:
        console.out(json.dumps([r.to_json() for r in results], indent=1))
    else:
        table = Table("kernel", "problem", "dtype", "device", "stored ms", "now ms",
                      "change", "noise", "verdict", title="revalidation")
        for r in results:
            table.add_row(r.kernel, r.problem_key, r.dtype, r.device_kind,
                          f"{r.stored_ms:.4g}", "–" if r.new_ms is None else
                          f"{r.new_ms:.4g}", "–" if r.change is None else
                          f"{r.change:+.1%}", "–" if r.noise is None else
                          f"±{r.noise:.0%}", r.verdict)
        console.print(table)
        for r in results:
            if r.error:
                err.print(f"{r.kernel} {r.problem_key}: {r.error}", highlight=False)
        if not results:
            console.print("no stored best configs match")
    if any(r.verdict == "regressed" for r in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    for command in (best, export, report, revalidate):
        app.command()(command)
