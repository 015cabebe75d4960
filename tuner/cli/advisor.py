"""The "profile first" commands: ``tuner roofline``, ``tuner profile``, ``tuner plan``.

Each prints a rich table, or JSON with ``--json``, and ``--out FILE`` writes the JSON too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from tuner.cli.common import DbOption
from tuner.cli.common import console
from tuner.cli.common import err
from tuner.cli.common import friendly
from tuner.cli.common import settings_for
from tuner.core.parsing import UsageError
from tuner.core.parsing import parse_shape

DeviceOpt = Annotated[str, typer.Option(
    "--device-kind", "--gpu", help="Target device kind (datasheet table), e.g. h100-sxm.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Also write the JSON here.")]


def _emit(data: Any, as_json: bool, out: Path | None, console: Console) -> None:
    text = json.dumps(data, indent=1, default=str)
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text + "\n")
        except OSError as exc:
            raise UsageError(f"cannot write {out}: {exc}") from None
    if as_json:
        console.out(text)


def _fmt(value: float | None, unit: str = "", digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "never"
    return f"{value:.{digits}g}{unit}"


def roofline_command(kernel: str | None, shape: str | None, dtype: str | None,
                     flops: float | None, nbytes: float | None, device_kind: str,
                     measured_ms: float | None, tokens_for: str | None, as_json: bool,
                     out: Path | None, console: Console) -> None:
    from tuner.advisor.roofline_view import roofline_answer
    from tuner.advisor.roofline_view import tokens_table

    if tokens_for:
        dims = parse_shape(tokens_for, ("K", "N"))
        if set(dims) != {"K", "N"}:
            raise UsageError("--tokens-for needs K and N, e.g. --tokens-for K=4096,N=4096")
        rows = tokens_table(dims["K"], dims["N"], dtype or "bf16")
        _emit({"K": dims["K"], "N": dims["N"], "dtype": dtype or "bf16", "devices": rows},
              as_json, out, console)
        if not as_json:
            table = Table("device", "ridge FLOP/B", "tokens to be compute-bound",
                          title=f"(tokens×{dims['K']})·({dims['K']}×{dims['N']}) "
                                f"{dtype or 'bf16'} matmul")
            for r in rows:
                table.add_row(r["device_kind"], _fmt(r["ridge"]), _fmt(r["tokens"], "", 4))
            console.print(table)
        return
    exps = None
    if kernel:
        from tuner.kernels import load_kernel

        spec = load_kernel(kernel)
        if not shape:
            example = ",".join(f"{k}={v}" for k, v in spec.example_problem.items())
            raise UsageError(f"give --shape with a kernel, e.g. --shape {example}")
        problem = parse_shape(shape, spec.dims)
        errors = spec.problem_errors(problem) + spec.dtype_errors(dtype or spec.dtypes[0])
        if errors:
            raise UsageError("; ".join(errors))
        dt = dtype or spec.dtypes[0]
        flops, nbytes = spec.flops(problem, dt), spec.min_bytes(problem, dt)
        compute = spec.compute_dtype(dt)
        exps = spec.exps(problem) if spec.exps else None
    elif flops is None or nbytes is None:
        raise UsageError("give a kernel and --shape, or --flops and --bytes, or --tokens-for")
    else:
        compute = dtype or "bf16"
    try:
        answer = roofline_answer(flops, nbytes, compute, device_kind, measured_ms, exps)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _emit(answer.to_json(), as_json, out, console)
    if as_json:
        return
    table = Table("", "", title=f"roofline on {device_kind} ({compute})", show_header=False)
    for label, value in (
            ("work", f"{_fmt(answer.flops / 1e9)} GFLOP, {_fmt(answer.min_bytes / 1e6)} MB"),
            ("arithmetic intensity", f"{_fmt(answer.intensity)} FLOP/B"),
            ("ridge point", f"{_fmt(answer.ridge)} FLOP/B"),
            ("bound", answer.bound),
            ("roofline time", f"{_fmt(answer.roof_ms)} ms (compute {_fmt(answer.compute_ms)}, "
                              f"memory {_fmt(answer.memory_ms)})")):
        table.add_row(label, value)
    if answer.exp_ms is not None:
        table.add_row("exp roof", f"{_fmt(answer.exp_ms)} ms (softmax exponentials on the "
                                  "special-function units)")
    if answer.measured_ms is not None:
        table.add_row("measured", f"{_fmt(answer.measured_ms)} ms")
        table.add_row("fraction of the roofline", _fmt(answer.fraction))
        table.add_row("headroom", f"{_fmt(answer.headroom_ms)} ms (at most "
                                  f"{_fmt(answer.max_speedup)}× faster)")
    console.print(table)


def render_profile(profile: Any, console: Console, top: int) -> None:
    table = Table("operator", "input shapes", "calls", "ms", "share", "GFLOP", "MB", "bound",
                  "fraction", "saving ms", f"roof on {profile.target_kind} ms",
                  title=f"{profile.program} on {profile.device_kind}: "
                        f"{profile.wall_ms:.1f} ms")
    for g in profile.groups[:top]:
        shapes = " ".join("x".join(map(str, s)) for s in g.shapes
                          if isinstance(s, list) and s)
        table.add_row(g.op.removeprefix("aten::"), shapes, str(g.calls), _fmt(g.time_ms),
                      f"{g.share:.1%}", _fmt(g.flops and g.flops / 1e9),
                      _fmt(g.min_bytes and g.min_bytes / 1e6), g.bound or "?",
                      _fmt(g.fraction), _fmt(g.saving_ms), _fmt(g.roof_ms_target))
    table.add_row("(outside operators)", "Python, data loading, waiting", "",
                  _fmt(profile.outside_ms), f"{profile.outside_share:.1%}", "", "", "", "",
                  "", "")
    console.print(table)
    if profile.chains:
        chains = Table("chain (matched by order and shape)", "runs", "saved MB per run",
                       f"fused roof on {profile.target_kind} ms", "saving ms",
                       "tunable as", title="fusion advice")
        for c in profile.chains:
            chains.add_row(" → ".join(op.removeprefix("aten::") for op in c.ops),
                           str(c.occurrences), _fmt(c.saved_bytes / 1e6),
                           _fmt(c.fused_roof_ms), _fmt(c.saving_ms), c.service_kernel or "–")
        console.print(chains)
    console.print(f"[dim]fraction and saving: against {profile.device_kind}'s ceilings; "
                  "a kernel with a small share cannot save more than that share (Amdahl)[/]")


def profile_command(program: str, args: list[str], device_kind: str,
                    device: str | None) -> Any:
    from tuner.app.advisor import profile as profile_program
    from tuner.core.devices.datasheets import DEVICES

    if device_kind not in DEVICES:
        raise UsageError(f"unknown device kind {device_kind!r} (choose from "
                         f"{', '.join(DEVICES)})")
    if program.endswith(".py") and not Path(program).is_file():
        raise UsageError(f"no such script: {program}")
    try:
        return profile_program(program, args, device_kind, device, settings_for(None))
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise UsageError(f"{program} exited with status {exc.code}") from None
        raise
    except ImportError as exc:
        raise UsageError(f"cannot run {program}: {exc}") from None
    except Exception as exc:  # the user's program failed: say so in one line
        raise UsageError(f"{program} failed: {type(exc).__name__}: {exc}") from None


def plan_command(source: str, args: list[str], device_kind: str, total: int, minimum: int,
                 submit: bool, as_json: bool, out: Path | None, console: Console,
                 submit_entry: Callable[[Any], int]) -> None:
    from tuner.advisor.plan import make_plan
    from tuner.advisor.profile import Profile

    if source.endswith(".json"):
        try:
            profile = Profile.from_json(json.loads(Path(source).read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise UsageError(f"cannot read the profile {source}: {exc}") from None
    else:
        profile = profile_command(source, args, device_kind, None)
    try:
        entries = make_plan(profile, total, minimum)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    jobs: list[dict[str, Any]] = [e.to_json() | {"command": e.command(device_kind)}
                                  for e in entries]
    data = {"program": profile.program, "device_kind": device_kind,
            "wall_ms": profile.wall_ms, "jobs": jobs}
    if submit:
        for e, job in zip(entries, jobs, strict=True):
            job["job_id"] = submit_entry(e)
    _emit(data, as_json, out, console)
    if as_json:
        return
    table = Table("kernel", "problem", "dtype", "expected gain ms", "share", "trials", "from",
                  title=f"tuning plan for {profile.program} ({total} trials)")
    for e in entries:
        table.add_row(e.kernel, e.shape_text(), e.dtype, _fmt(e.gain_ms),
                      f"{e.gain_share:.1%}", str(e.trials), e.detail)
    console.print(table)
    if not entries:
        console.print("nothing the service can tune has a measurable gain here")
    elif not submit:
        console.print("submit them all with --submit, or one by one:")
        for e in entries:
            console.print(f"  {e.command(device_kind)}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``roofline``, ``profile`` and ``plan`` to the CLI."""

    @app.command()
    @friendly
    def roofline(
        kernel: Annotated[str | None, typer.Argument(
            help="A kernel (tuner kernels) whose FLOPs and bytes to use.",
            show_default=False)] = None,
        shape: Annotated[str | None, typer.Option("--shape", "-s", help="Its problem.")] = None,
        dtype: Annotated[str | None, typer.Option(help="Input dtype (default: the kernel's "
                                                       "first; bf16 otherwise).")] = None,
        flops: Annotated[float | None, typer.Option(help="Raw FLOPs (instead of a kernel).")]
        = None,
        nbytes: Annotated[float | None, typer.Option("--bytes", help="Raw minimum bytes.")]
        = None,
        device_kind: DeviceOpt = "h100-sxm",
        measured_ms: Annotated[float | None, typer.Option(
            help="A measured time: adds the fraction and the headroom.")] = None,
        tokens_for: Annotated[str | None, typer.Option(
            help="K=…,N=…: the tokens (M) at which that matmul turns compute-bound, on every "
                 "device.")] = None,
        as_json: JsonOpt = False, out: OutOpt = None,
    ) -> None:
        """The roofline of a problem: intensity, ridge point, bound, time, and a measured
        time's fraction and headroom."""
        roofline_command(kernel, shape, dtype, flops, nbytes, device_kind, measured_ms,
                         tokens_for, as_json, out, console)

    @app.command()
    @friendly
    def profile(
        program: Annotated[str, typer.Argument(help="A script (path.py) or a module name.")],
        args: Annotated[list[str] | None, typer.Argument(
            help="Arguments for the program (after --).", show_default=False)] = None,
        device_kind: DeviceOpt = "h100-sxm",
        device: Annotated[str | None, typer.Option(
            help="cpu or cuda (default: cuda when available).")] = None,
        top: Annotated[int, typer.Option(help="Operator rows to show.")] = 25,
        chart: Annotated[Path | None, typer.Option(
            help="Write the roofline chart of the operators here (PNG).")] = None,
        as_json: JsonOpt = False, out: OutOpt = None,
    ) -> None:
        """Run a torch program under torch.profiler: time per operator and shape, its
        roofline, the largest possible saving, and fusion advice."""
        result = profile_command(program, args or [], device_kind, device)
        _emit(result.to_json(), as_json, out, console)
        if not as_json:
            render_profile(result, console, top)
        if chart is not None:
            from tuner.advisor.chart import roofline_chart

            n = roofline_chart(result, result.peaks, result.bandwidth_gbps, chart)
            err.print(f"roofline chart of {n} operator groups: {chart}")

    @app.command()
    @friendly
    def plan(
        source: Annotated[str, typer.Argument(
            help="A program to profile, or a profile written by tuner profile --out x.json.")],
        args: Annotated[list[str] | None, typer.Argument(
            help="Arguments for the program (after --).", show_default=False)] = None,
        device_kind: DeviceOpt = "h100-sxm",
        trials: Annotated[int, typer.Option(help="Trials for all jobs together.")] = 200,
        min_trials: Annotated[int, typer.Option(help="Trials of the smallest job.")] = 5,
        submit: Annotated[bool, typer.Option(help="Submit the jobs to the fleet.")] = False,
        db: DbOption = None,
        as_json: JsonOpt = False, out: OutOpt = None,
    ) -> None:
        """Turn a profile into tuning jobs for what the service can tune, trials split by
        expected gain (largest first); --submit submits them."""
        from tuner.app.fleet import submit_job
        from tuner.app.options import JobOptions
        from tuner.app.options import build_spec

        def submit_entry(e: Any) -> int:
            settings = settings_for(db)
            options = JobOptions(e.kernel, [e.shape_text()], e.dtype, "auto", device_kind,
                                 e.trials, None, None, None, "auto", None, 4, 120, 60, None,
                                 None)
            spec, kernel = build_spec(options, settings, submit=True)
            created = submit_job(spec, kernel, settings)
            err.print(
                f"job {created.job_id}: {len(created.study_names)} problem(s) for the "
                f"{spec.device_kind} queue; follow it with: tuner watch {created.job_id}",
                highlight=False)
            return created.job_id

        plan_command(source, args or [], device_kind, trials, min_trials, submit, as_json, out,
                     console, submit_entry)
