"""Lookup benchmark: what ``tuner.best_config`` costs production code, beside a plain dict.

One run, one machine:

* **hot path**: the same key asked again (cached in the process) — per-call latency, median of
  ``--batches`` batches of ``--calls`` calls, beside a plain ``dict`` lookup plus copy of the
  same config in the same run (the floor);
* **first call**: the uncached call for a new key (cache cleared before each), against an
  export file, SQLite and a private PostgreSQL, each holding ``--rows`` best configs;
* **default source**: the same with no ``source=`` (``TUNER_BEST_CONFIGS`` names the export,
  resolved once per process);
* **tuner.autotune**: what a launch through ``tuner.autotune`` adds before Triton's launch
  (``TunedKernel.tuned_config`` on the launch arguments, cached), beside the dict floor;
* **tuner.patch**: what ``tuner.patch()`` adds to a library's own launch (binding the
  arguments, the shape signature, the cached answer, the rewritten meta-parameters), beside
  the dict floor, and a whole patched launch as a ratio to the unpatched launch of the same
  kernel in the same run (on the interpreter here: a launch costs milliseconds of Python, so
  the ratio says little about a GPU launch, where only the per-launch µs matter).

The rows come from one real tuning job (matmul on the interpreter, 2 trials) whose best-config
row is copied to ``--rows`` problems. Prints a table and writes JSON (``--out``).

    python benchmarks/lookup.py --rows 1000
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.serving import lookup  # noqa: E402

KERNEL, DTYPE = "matmul", "fp16"


def _problem(i: int) -> dict[str, int]:
    return {"M": 64 + i, "N": 64, "K": 64}


def populate(db_url: str, rows: int) -> None:
    """One real tuning job, then its best-config row copied to ``rows`` problems."""
    import os

    from db.models import BestConfig
    from db.session import make_engine
    from db.session import session_factory
    from tuner.api import tune
    from tuner.core.types import problem_hash

    os.environ.setdefault("TRITON_INTERPRET", "1")
    tune(KERNEL, "M=64,N=64,K=64", dtype=DTYPE, trials=2, backend="interpret",
         confirm_top=0, db=db_url)
    engine = make_engine(db_url)
    with session_factory(engine).begin() as session:
        first = session.scalars(sa.select(BestConfig)).one()
        columns = [c.key for c in BestConfig.__table__.columns if c.key != "id"]
        for i in range(1, rows):
            row = BestConfig(**{c: getattr(first, c) for c in columns})
            row.problem = _problem(i)
            row.problem_hash = problem_hash(row.problem)
            row.problem_key = f"M{row.problem['M']}-N64-K64"
            session.add(row)
    engine.dispose()


def hot_path_us(source: str | None, calls: int, batches: int) -> dict[str, float]:
    problem = _problem(7)
    lookup.clear_cache()
    answer = lookup.best_config(KERNEL, problem, DTYPE, source=source)
    assert answer is not None
    plain = {(KERNEL, tuple(sorted(problem.items())), DTYPE): dict(answer)}

    def batch(fn: Any) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - start) / calls * 1e6

    key = (KERNEL, tuple(sorted(problem.items())), DTYPE)
    ours = [batch(lambda: lookup.best_config(KERNEL, problem, DTYPE, source=source))
            for _ in range(batches)]
    floor = [batch(lambda: dict(plain[key])) for _ in range(batches)]
    return {"best_config_us": statistics.median(ours), "dict_us": statistics.median(floor)}


def autotune_overhead_us(source: str, calls: int, batches: int) -> dict[str, float]:
    """Per-launch cost of ``tuner.autotune``'s config choice (no kernel launched)."""
    import os

    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    from tuner.kernels.matmul import _matmul_kernel
    from tuner.serving.autotune import autotune

    seeds = [{"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 1}]
    import triton

    kernel = autotune(configs=[triton.Config(c) for c in seeds], key=["M", "N", "K"],
                      name=KERNEL, source=source)(_matmul_kernel)
    a = torch.empty(1, dtype=torch.float16)
    p = _problem(7)
    args = (a, a, a, a, a, a, a, p["M"], p["N"], p["K"])
    lookup.clear_cache()
    assert kernel.tuned_config(*args) is not None
    plain = {(KERNEL, tuple(sorted(p.items())), DTYPE): seeds[0]}
    key = (KERNEL, tuple(sorted(p.items())), DTYPE)

    def batch(fn: Any) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - start) / calls * 1e6

    ours = [batch(lambda: kernel.tuned_config(*args)) for _ in range(batches)]
    floor = [batch(lambda: dict(plain[key])) for _ in range(batches)]
    return {"best_config_us": statistics.median(ours), "dict_us": statistics.median(floor)}


def patch_overhead(calls: int, batches: int) -> dict[str, float]:
    """Per-launch cost of ``tuner.patch`` on a captured-style kernel (the answer cached), and
    patched vs unpatched whole launches (interpreter)."""
    import os

    os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    from tests.kernels.captured_program import _scale_rows_kernel
    from tests.kernels.captured_program import scale_rows
    from tuner.kernels.captured import launch_problem
    from tuner.serving import patch

    x = torch.randn(16, 100)
    args = (x, torch.empty_like(x), 100, 100, 2.0)
    kwargs = {"BLOCK_SIZE": 128, "num_warps": 4}
    runtime = dict(zip(("X", "Y", "stride", "n_cols", "scale"), args, strict=True))
    key = (id(_scale_rows_kernel), tuple(sorted(launch_problem(runtime).items())), "fp32")
    config = {"BLOCK_SIZE": 256, "num_warps": 2, "num_stages": 1}
    plain = {key: config}

    def per_call(fn: Any, n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - start) / n * 1e6

    assert patch.patch()
    patch._answers[key] = config  # the answer as the first call leaves it cached
    ours = [per_call(lambda: patch.tuned_meta(_scale_rows_kernel, args, kwargs), calls)
            for _ in range(batches)]
    floor = [per_call(lambda: dict(plain[key]), calls) for _ in range(batches)]
    launches = max(3, calls // 1000)
    patched = [per_call(lambda: scale_rows(x, 2.0), launches) for _ in range(batches)]
    patch.unpatch()
    unpatched = [per_call(lambda: scale_rows(x, 2.0), launches) for _ in range(batches)]
    return {"best_config_us": statistics.median(ours), "dict_us": statistics.median(floor),
            "patched_launch_us": statistics.median(patched),
            "unpatched_launch_us": statistics.median(unpatched),
            "launch_ratio": statistics.median(patched) / statistics.median(unpatched)}


def first_call_ms(source: str | None, repeats: int = 5) -> float:
    times = []
    for i in range(repeats):
        lookup.clear_cache()
        start = time.perf_counter()
        answer = lookup.best_config(KERNEL, _problem(100 + i), DTYPE, source=source)
        times.append((time.perf_counter() - start) * 1e3)
        assert answer is not None and answer.tier == "exact"
    return statistics.median(times)


def _relative(path: Path) -> str:
    """``path`` relative to the repository (or its name): results name no local folder."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else path.name


def main() -> None:
    import os

    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="The committed figures (README) are regenerated with "
               "--out benchmarks/results/lookup.json.")
    parser.add_argument("--rows", type=int, default=1000,
                        help="best configs each source holds (default: %(default)s)")
    parser.add_argument("--calls", type=int, default=100_000,
                        help="calls per timed batch of the hot path (default: %(default)s)")
    parser.add_argument("--batches", type=int, default=7,
                        help="timed batches; the median is reported (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("lookup.json"),
                        help="JSON file to write (default: ./lookup.json; the committed "
                             "results are never overwritten unless named)")
    args = parser.parse_args()

    from tuner.core.settings import Settings
    from tuner.testing.services import PostgresServer
    from tuner.views.jobs import export_best

    shown = {**vars(args), "out": _relative(args.out)}  # no absolute path in the results
    report: dict[str, Any] = {"args": {k: str(v) for k, v in shown.items()},
                              "host": platform.node(), "date": time.strftime("%Y-%m-%d")}
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = f"sqlite:///{tmp}/tuner.db"
        populate(sqlite, args.rows)
        export = Path(tmp) / "best.json"
        export_best(Settings.from_env().with_db(sqlite), export, None, None)
        postgres = PostgresServer()
        try:
            pg = postgres.url
            populate(pg, args.rows)
            sources = {"export file": str(export), "sqlite": sqlite, "postgresql": pg}
            report["hot_path"] = {name: hot_path_us(src, args.calls, args.batches)
                                  for name, src in sources.items()}
            report["first_call_ms"] = {name: first_call_ms(src)
                                       for name, src in sources.items()}
            os.environ["TUNER_BEST_CONFIGS"] = str(export)
            report["hot_path"]["default source"] = hot_path_us(None, args.calls,
                                                               args.batches)
            report["first_call_ms"]["default source"] = first_call_ms(None)
            report["hot_path"]["tuner.autotune"] = autotune_overhead_us(
                str(export), args.calls, args.batches)
            report["first_call_ms"]["tuner.autotune"] = None  # no separate first call
            report["hot_path"]["tuner.patch"] = patch_overhead(args.calls, args.batches)
            report["first_call_ms"]["tuner.patch"] = None
        finally:
            postgres.close()
    print(f"\nlookup of one config among {args.rows} stored (median of {args.batches} "
          f"batches of {args.calls} calls)")
    print(f"{'source':>14} {'hot path µs':>12} {'dict µs':>9} {'ratio':>6} {'first call ms':>14}")
    for name, hot in report["hot_path"].items():
        ratio = hot["best_config_us"] / hot["dict_us"]
        first = report["first_call_ms"][name]
        print(f"{name:>14} {hot['best_config_us']:12.2f} {hot['dict_us']:9.2f} {ratio:6.1f} "
              + (f"{first:14.2f}" if first is not None else f"{'–':>14}"))
    launch = report["hot_path"]["tuner.patch"]
    print(f"tuner.patch: a whole patched launch {launch['patched_launch_us']:.0f} µs vs "
          f"unpatched {launch['unpatched_launch_us']:.0f} µs (ratio "
          f"{launch['launch_ratio']:.3f}; interpreter launches)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
