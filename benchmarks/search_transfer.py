"""Transfer between GPUs on recorded spaces: does a new GPU start warm from another GPU's
results of the same kernel family?

For every recording (the *target*) and every other recording of its family (the *source*,
another GPU), the default search runs on the target three ways, ``--seeds`` seeds each:

* ``cold`` — no transfer;
* ``best3`` — the source's three best configs measured first (the service's ``--transfer 3``
  from stored best configs);
* ``results`` — every stored result of the source as the search's prior
  (``tuner.search.transfer.measured_prior``: the search starts from the source's best configs
  and its model learns only how the target differs), plus the three best first.

Fraction of the target's optimum after B measured target configs (B = 10, 20, 50); the
source's measurements cost nothing here (they are already in the database).

    python benchmarks/search_transfer.py --seeds 20
"""

from __future__ import annotations

import argparse
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

from benchmarks.search_heldout import family  # noqa: E402
from benchmarks.search_runs import recording  # noqa: E402
from benchmarks.search_runs import simulate  # noqa: E402
from search_spaces.recorded import Recording  # noqa: E402
from tuner.search.transfer import measured_prior  # noqa: E402

BUDGETS = (10, 20, 50)
MODES = ("cold", "best3", "results")


def source_results(rec: Recording) -> list[tuple[dict[str, Any], float | None]]:
    """Every config of a recording with its fraction of that recording's optimum (``None``:
    failed) — what the database holds after tuning the kernel on that GPU."""
    best = rec.best_time_ms()
    out = []
    for entry in rec.entries.values():
        config = {k: entry[k] for k in rec.keys}
        t = entry.get("time")
        out.append((config, best / t if isinstance(t, int | float) and t > 0 else None))
    return out


def _task(args: tuple[str, str, str, int]) -> tuple[str, str, str, list[float]]:
    target, source, mode, seed = args
    if mode == "cold":
        return target, source, mode, simulate(target, "default", seed, max(BUDGETS)).curve
    results = source_results(recording(source))
    ranked = sorted((r for r in results if r[1] is not None), key=lambda r: -(r[1] or 0.0))
    warm = [config for config, _ in ranked[:3]]
    prior = measured_prior(results) if mode == "results" else None
    run = simulate(target, "default", seed, max(BUDGETS), prior=prior, warm_start=warm)
    return target, source, mode, run.curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "search_transfer.json")
    args = parser.parse_args()
    files = sorted(str(f) for f in (ROOT / "benchmarks" / "data" / "replay").glob("*.json*"))
    pairs = [(t, s) for t in files for s in files
             if s != t and family(Path(s).name) == family(Path(t).name)]
    tasks = [(t, "-", "cold", seed) for t in sorted({t for t, _ in pairs})
             for seed in range(args.seeds)]
    tasks += [(t, s, m, seed) for t, s in pairs for m in MODES[1:] for seed in range(args.seeds)]
    curves: dict[tuple[str, str, str], list[list[float]]] = {}
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for target, source, mode, curve in pool.imap_unordered(_task, tasks):
            curves.setdefault((target, source, mode), []).append(curve)

    def cell(runs: list[list[float]], b: int) -> dict[str, float]:
        at_b = np.array([c[b - 1] for c in runs])
        return {"mean": float(at_b.mean()), "p10": float(np.quantile(at_b, 0.1))}

    name = {f: Path(f).name.split(".json")[0] for f in files}
    rows: list[dict[str, Any]] = []
    print(f"{'target':>26} {'source':>26} " + " ".join(
        f"{m + ' B=' + str(b):>16}" for m in MODES for b in BUDGETS))
    for t, s in pairs:
        row: dict[str, Any] = {"target": name[t], "source": name[s]}
        for m in MODES:
            runs = curves[(t, "-", m)] if m == "cold" else curves[(t, s, m)]
            row[m] = {str(b): cell(runs, b) for b in BUDGETS}
        rows.append(row)
        print(f"{name[t]:>26} {name[s]:>26} " + " ".join(
            f"{row[m][str(b)]['mean']:.3f}/{row[m][str(b)]['p10']:.3f}".rjust(16)
            for m in MODES for b in BUDGETS))
    overall = {m: {str(b): {"mean": float(np.mean([r[m][str(b)]["mean"] for r in rows])),
                            "worst_pair": float(min(r[m][str(b)]["mean"] for r in rows))}
                   for b in BUDGETS} for m in MODES}
    print("\nmean over the (target, source) pairs (worst pair):")
    for m in MODES:
        print(f"  {m:>8} " + "  ".join(
            f"B={b}: {overall[m][str(b)]['mean']:.3f} ({overall[m][str(b)]['worst_pair']:.3f})"
            for b in BUDGETS))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"budgets": BUDGETS, "seeds": args.seeds, "pairs": rows,
                                    "overall": overall}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
