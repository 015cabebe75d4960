"""Cold start: the default search's first measurements against candidate initial designs and
Kernel Tuner's strategies, at B = 10 and 20.

The shipped matmul recording (``gemm_RTX_2080_Ti``) is the held-out one: a design is chosen on
the *other* recordings (``--no-shipped --extra …``: the other kernel families and public Kernel
Tuner caches of the same CLBlast GEMM on other GPUs; the design with the best mean over those
files of the B = 10 and B = 20 means, printed last) and then reported on the shipped one.
Candidates (``ModelSearch`` keyword arguments, ``tuner.search.design``): the default
(``alternate-snap``: random, maximin, snapped, maximin, …; 7 starts), the design before it
(``alternate``: random and maximin alternately), all random, all maximin, all snapped, 5 and 10
starts, a Latin hypercube over each parameter's value indices (``lhs``), and other cycles of
random (R), maximin (M) and snapped (S) picks. ``--seeds`` seeds each; mean ± se.

    python benchmarks/cold_start.py --extra hub/gemm_RTX_3090.json.gz hub/gemm_RTX_Titan.json.gz
    python benchmarks/cold_start.py --no-shipped --seeds 60 --first-seed 20 \
        --only alternate,default --extra <every other recording>
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
    "lhs": {"init": "lhs"}, "alternate": {"init": "alternate"}, "snap": {"init": "snap"},
    **{f"cycle-{c}": {"init": f"cycle-{c}"} for c in ("RS", "MS", "RMS", "SMRM", "RMSMSM")},
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
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first-seed .. first-seed + seeds - 1")
    parser.add_argument("--no-shipped", action="store_true",
                        help="leave the shipped gemm recording out (choosing on the others)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", default="",
                        help="run only these designs and peers (comma-separated names)")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "cold_start.json")
    args = parser.parse_args()
    files = [*([] if args.no_shipped else [str(SHIPPED)]), *map(str, args.extra)]
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
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = [(f, s, seed) for f in files for s in searches for seed in seeds]
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
    means = {s: {str(b): float(np.mean([table[n][s][str(b)]["mean"] for n in table]))
                 for b in BUDGETS} for s in searches}
    print(f"mean over the {len(table)} files (choice: the best mean of B = 10 and B = 20)")
    for s in sorted(searches, key=lambda s: -sum(means[s].values())):
        print(f"  {s:>18} " + "  ".join(f"B={b} {means[s][str(b)]:.4f}" for b in BUDGETS)
              + f"  score {np.mean(list(means[s].values())):.4f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"budgets": BUDGETS, "seeds": args.seeds,
                                    "first_seed": args.first_seed, "designs": DESIGNS,
                                    "files": table, "mean_over_files": means}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
