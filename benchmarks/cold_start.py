"""Cold start on matmul-like recordings: the default search's first measurements against
Kernel Tuner's strategies, and candidate initial designs, at B = 10 and 20.

The shipped recording (``gemm_RTX_2080_Ti``) is the held-out one: a candidate design is only
worth shipping if it leads on the *other* recordings (``--extra``: public Kernel Tuner caches of
the same CLBlast GEMM on other GPUs) and then holds on the shipped one. Candidates
(``ModelSearch`` keyword arguments): the shipped design (7 starts, random and maximin
alternately), all random, all maximin, 5 and 10 starts, and a Latin hypercube over each
parameter's value indices (``lhs``, ``tuner.search.design``). ``--seeds`` seeds each; mean ± se.

    python benchmarks/cold_start.py --extra hub/gemm_RTX_3090.json.gz hub/gemm_RTX_Titan.json.gz
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.search_runs import recording  # noqa: E402
from benchmarks.search_runs import simulate  # noqa: E402

BUDGETS = (10, 20)
SHIPPED = ROOT / "benchmarks" / "data" / "replay" / "gemm_RTX_2080_Ti.json.gz"
DESIGNS: dict[str, dict[str, Any]] = {
    "default": {}, "random": {"init": "random"}, "maximin": {"init": "maximin"},
    "5 starts": {"n_init": 5}, "10 starts": {"n_init": 10},
    "lhs": {"init": "lhs"},
}
PEERS = ("kt:pso", "kt:diff_evo", "kt:dual_annealing")


def _task(args: tuple[str, str, int]) -> tuple[str, str, list[float]]:
    path, search, seed = args
    if search in DESIGNS:
        run = simulate(path, "default", seed, max(BUDGETS), options=DESIGNS[search] or None)
    else:
        run = simulate(path, search, seed, max(BUDGETS))
    return path, search, run.curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", nargs="*", type=Path, default=[],
                        help="more matmul-like Kernel Tuner cache files")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", default="",
                        help="run only these designs and peers (comma-separated names)")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "cold_start.json")
    args = parser.parse_args()
    files = [str(SHIPPED), *map(str, args.extra)]
    for f in files:
        try:
            recording(f)
        except (OSError, ValueError) as exc:
            parser.exit(2, f"error: {f}: {exc}\n")
    peers = list(PEERS) if importlib.util.find_spec("kernel_tuner") else []
    searches = [*DESIGNS, *peers]
    if args.only:
        wanted = [s for s in args.only.split(",") if s]
        unknown = [s for s in wanted if s not in searches]
        if unknown:
            parser.exit(2, f"error: unknown {', '.join(unknown)}; choose among "
                        f"{', '.join(searches)}\n")
        searches = wanted
    tasks = [(f, s, seed) for f in files for s in searches for seed in range(args.seeds)]
    curves: dict[tuple[str, str], list[list[float]]] = {}
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for path, search, curve in pool.imap_unordered(_task, tasks):
            curves.setdefault((path, search), []).append(curve)
    table: dict[str, Any] = {}
    for f in files:
        name = Path(f).name.split(".json")[0]
        table[name] = {s: {str(b): {
            "mean": float(np.mean([c[b - 1] for c in curves[(f, s)]])),
            "se": float(np.std([c[b - 1] for c in curves[(f, s)]], ddof=1)
                        / np.sqrt(len(curves[(f, s)])))} for b in BUDGETS} for s in searches}
        print(name + (" (held out: shipped)" if f == str(SHIPPED) else ""))
        for s in searches:
            print(f"  {s:>18} " + "  ".join(
                f"B={b} {table[name][s][str(b)]['mean']:.3f}±{table[name][s][str(b)]['se']:.3f}"
                for b in BUDGETS))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"budgets": BUDGETS, "seeds": args.seeds,
                                    "designs": DESIGNS, "files": table}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
