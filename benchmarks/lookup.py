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
  (``TunedKernel.tuned_config`` on the launch arguments, cached), beside the dict floor.

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
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
