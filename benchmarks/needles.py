"""Stuck runs on needle-like recordings: candidates side by side on seeds the held-out report
did not use.

A needle space's optimum is a handful of configs (convolution_W6600: four with power-of-two
block sizes); a run that never finds them is *stuck* in a basin below it. The held-out report
(``benchmarks/search_efficiency.py``) judges seeds 0–19; how many runs stick is luck enough
that twenty seeds can show none or four, so this runs ``--seeds`` more (from ``--first-seed``)
of each candidate of ``benchmarks.search_runs.VARIANTS`` on each file and reports, at B = 200,
the mean, the 10th percentile and the number of runs below ``--stuck`` of the optimum (and
the mean at B = 100). Table on stdout, JSON to ``--out``.

    python benchmarks/needles.py --seeds 80 --first-seed 140 --candidates \
        feas+fails+diverse-mixed+pow2auto+snap,feas+fails+diverse-mixed+pow2auto+snap+alt10 \
        --out benchmarks/results/needles_alternatives.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.search_runs import VARIANTS  # noqa: E402
from benchmarks.search_runs import simulate  # noqa: E402

REPLAY = ROOT / "benchmarks" / "data" / "replay"
NEEDLES = tuple(str(REPLAY / f"convolution_{gpu}.json.gz") for gpu in ("A4000", "A6000", "W6600"))
BUDGET = 200


def _task(args: tuple[str, str, int]) -> tuple[str, str, int, float, float]:
    path, candidate, seed = args
    curve = simulate(path, f"v:{candidate}", seed, BUDGET).curve
    return path, candidate, seed, curve[BUDGET - 1], curve[99]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(NEEDLES),
                        help="Kernel Tuner cache files (default: the three shipped convolutions)")
    parser.add_argument("--candidates", required=True,
                        help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--first-seed", type=int, default=20)
    parser.add_argument("--stuck", type=float, default=0.98,
                        help="a run below this fraction of the optimum at B = 200 is stuck")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "needles.json")
    args = parser.parse_args()
    candidates = [c for c in args.candidates.split(",") if c]
    unknown = [c for c in candidates if c not in VARIANTS]
    if unknown or not candidates:
        parser.exit(2, f"error: choose candidates among {', '.join(VARIANTS)}\n")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = [(f, c, s) for f in args.files for c in candidates for s in seeds]
    runs: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for path, candidate, seed, at_200, at_100 in pool.imap_unordered(_task, tasks):
            runs.setdefault((path, candidate), []).append((seed, at_200, at_100))
    table: dict[str, dict[str, dict[str, float]]] = {}
    print(f"B = {BUDGET}, seeds {seeds.start}-{seeds.stop - 1}: mean / 10th percentile / "
          f"runs below {args.stuck} (mean at B = 100)")
    for f in args.files:
        name = Path(f).name.split(".json")[0]
        table[name] = {}
        for c in candidates:
            done = sorted(runs[(f, c)])
            end = np.array([r[1] for r in done])
            mid = np.array([r[2] for r in done])
            table[name][c] = {"mean": float(end.mean()), "p10": float(np.percentile(end, 10)),
                              "stuck": int((end < args.stuck).sum()), "runs": len(end),
                              "mean_at_100": float(mid.mean()),
                              "at_200": [float(v) for v in end]}  # seed order
            t = table[name][c]
            print(f"  {name:>20} {c:>42} {t['mean']:.3f} / {t['p10']:.3f} / "
                  f"{t['stuck']} of {t['runs']} ({t['mean_at_100']:.3f})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"budget": BUDGET, "seeds": list(seeds), "stuck_below":
                                    args.stuck, "files": table}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
