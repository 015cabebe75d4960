"""Search efficiency on recorded tuning spaces: the fraction of the optimum each search reaches
after B measured configurations.

Definitions (``benchmarks/data/replay/README.md``): budget B = distinct configurations actually
measured (present in the recording, succeeded or failed); statically invalid proposals and
repeats cost nothing. Fraction at B = best time of the whole space / best time found within the
first B measurements (0 if none succeeded), over ``--seeds`` seeds: mean and 10th percentile.

Searches: ``default`` (the service's default, ``auto``), uniform ``random`` (Optuna's
RandomSampler) and Optuna's ``tpe`` with default settings.

    python benchmarks/search_efficiency.py                       # every recording in data/replay
    python benchmarks/search_efficiency.py path/to/cache.json.gz  # any Kernel Tuner cache file
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

# One BLAS thread per process: the pool already fills every core, and the surrogate's small
# matrices run ~10x slower when each process also spawns a thread per core.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_spaces import Context  # noqa: E402
from search_spaces.recorded import load_recording  # noqa: E402
from search_spaces.recorded import recorded_space  # noqa: E402
from tuner.control.searches import make_proposer  # noqa: E402

BUDGETS = (10, 20, 50, 100, 200)
SEARCHES = {"default": "auto", "random": "random", "tpe": "tpe"}
MAX_FREE = 2_000  # proposals that cost nothing (invalid or repeated), per run, before giving up


def simulate(path: str, search: str, seed: int, budget: int) -> list[float]:
    """Best fraction of the optimum after each measured config (length ``budget``)."""
    rec = load_recording(path)
    space = recorded_space(rec)
    best_ms = rec.best_time_ms()
    proposer = make_proposer(SEARCHES[search], space, Context(rec.problem(), "fp32"), seed)
    measured: dict[str, float | None] = {}
    curve: list[float] = []
    best = 0.0
    free = 0
    while len(measured) < budget and free < MAX_FREE:
        asked = proposer.ask()
        if asked is None:
            break
        config = asked.config
        if space.domain_errors(config) or rec.key_of(config) not in rec.entries:
            proposer.tell(asked.number, None)  # statically invalid: free
            free += 1
            continue
        key = rec.key_of(config)
        if key in measured:
            proposer.tell(asked.number, measured[key])  # a repeat: free
            free += 1
            continue
        value = rec.entries[key]["time"]
        fraction = best_ms / value if isinstance(value, int | float) and value > 0 else None
        measured[key] = fraction
        proposer.tell(asked.number, fraction)
        best = max(best, fraction or 0.0)
        curve.append(best)
    return curve + [best] * (budget - len(curve))


#: A cell's verdict for the default search against the best peer's mean: ahead, every search
#: at the optimum on every seed (nothing left to win), or behind.
VERDICTS = ("ahead", "tie at the optimum", "behind")


def summarise(curves: dict[str, list[list[float]]], searches: list[str], seeds: int,
              ) -> tuple[dict[str, dict[str, dict[str, float]]], list[str], list[str]]:
    """Per search and B: mean, p10 and standard error of the mean; the printed table (with the
    default's lead over the best peer, ± two standard errors); each B's verdict."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    compare = "default" in searches and len(searches) > 1
    lines = [f"{'B':>5} " + " ".join(f"{s:>17}" for s in searches)
             + (f" {'lead over best peer':>22}" if compare else "")]
    verdicts = []
    for b in BUDGETS:
        row = []
        for s in searches:
            at_b = np.array([c[b - 1] for c in curves[s]])
            stats = {"mean": float(at_b.mean()), "p10": float(np.quantile(at_b, 0.1)),
                     "se": float(at_b.std(ddof=1) / np.sqrt(len(at_b))) if len(at_b) > 1
                     else 0.0}
            table.setdefault(s, {})[str(b)] = stats
            row.append(f"{stats['mean']:.3f} / {stats['p10']:.3f}")
        line = f"{b:>5} " + " ".join(f"{r:>17}" for r in row)
        if compare:
            ours = table["default"][str(b)]
            peer = max((table[s][str(b)] for s in searches if s != "default"),
                       key=lambda st: st["mean"])
            lead = ours["mean"] - peer["mean"]
            two_se = 2 * float(np.hypot(ours["se"], peer["se"]))
            verdict = "ahead" if lead > 0 else "tie at the optimum" \
                if ours["mean"] == peer["mean"] == 1.0 else "behind"
            verdicts.append(verdict)
            line += f" {lead:+.4f} ± {two_se:.4f}" + ("" if verdict == "ahead" else
                                                       f" ({verdict})")
        lines.append(line)
    return table, lines, verdicts


def _task(args: tuple[str, str, int, int]) -> tuple[str, str, int, list[float], float]:
    path, search, seed, budget = args
    start = time.perf_counter()
    curve = simulate(path, search, seed, budget)
    return path, search, seed, curve, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="Kernel Tuner cache files "
                        "(default: every recording in benchmarks/data/replay)")
    parser.add_argument("--seeds", type=int, default=50,
                        help="seeds per (space, search); the issue asks for at least 20")
    parser.add_argument("--searches", default=",".join(SEARCHES))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "search_efficiency.json")
    args = parser.parse_args()
    files = args.files or sorted((ROOT / "benchmarks" / "data" / "replay").glob("*.json*"))
    searches = args.searches.split(",")
    budget = max(BUDGETS)
    tasks = [(str(f), s, seed, budget) for f in files for s in searches
             for seed in range(args.seeds)]
    results: dict[str, dict[str, list[list[float]]]] = {}
    seconds: dict[str, float] = {}
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for path, search, _seed, curve, took in pool.imap_unordered(_task, tasks):
            results.setdefault(path, {}).setdefault(search, []).append(curve)
            seconds[search] = seconds.get(search, 0.0) + took
    report: dict[str, Any] = {"budgets": BUDGETS, "seeds": args.seeds, "spaces": {},
                              "seconds_per_run": {s: seconds[s] / (len(files) * args.seeds)
                                                  for s in seconds}}
    verdicts: dict[str, int] = {}
    for path in map(str, files):
        name = Path(path).name.split(".json")[0]
        table, lines, cell_verdicts = summarise(results[path], searches, args.seeds)
        print(f"\n{name}  (fraction of the optimum after B measured configs; "
              f"mean / p10 over {args.seeds} seeds)")
        print("\n".join(lines))
        report["spaces"][name] = table
        for v in cell_verdicts:
            verdicts[v] = verdicts.get(v, 0) + 1
    if "default" in searches:
        cells = sum(verdicts.values())
        print(f"\ndefault vs the best peer in {cells} (space, B) cells: " + ", ".join(
            f"{verdicts.get(v, 0)} {v}" for v in VERDICTS))
        report["default_wins"] = {"cells": cells, "wins": verdicts.get("ahead", 0),
                                  **{v: verdicts.get(v, 0) for v in VERDICTS}}
    print("seconds per run: " + ", ".join(f"{s} {v:.1f}" for s, v in
                                          report["seconds_per_run"].items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
