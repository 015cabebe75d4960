"""CPU time per proposal of the default search on the largest recorded space, one core.

The driver proposes while devices measure, so a proposal's cost bounds the fleet's dispatch
rate. This runs the shipped default search (and Optuna's TPE as the baseline of the same run)
to ``--budget`` measured configs on the gemm recording (17,956 valid configs), in this one
process with one BLAS thread, and reports CPU milliseconds per ``ask`` + ``tell`` (time to load
the recording excluded): median, 95th percentile, and the 95th percentile of the proposals made
with at least 150 observations.

    python benchmarks/proposal_cost.py --seeds 5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.search_runs import recording  # noqa: E402
from benchmarks.search_runs import simulate  # noqa: E402

GEMM = ROOT / "benchmarks" / "data" / "replay" / "gemm_RTX_2080_Ti.json.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--file", type=Path, default=GEMM)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "proposal_cost.json")
    args = parser.parse_args()
    recording(str(args.file))  # loaded once, outside the timings
    report = {"file": args.file.name, "budget": args.budget, "seeds": args.seeds,
              "configs": len(recording(str(args.file)).entries), "searches": {}}
    print(f"{args.file.name}: {report['configs']} configs, {args.budget} measured per run, "
          f"{args.seeds} seeds, one process (CPU ms per proposal)")
    print(f"{'search':>10} {'median':>8} {'p95':>8} {'p95 >=150 obs':>14} {'max':>8}")
    for search in ("default", "tpe"):
        runs = [simulate(str(args.file), search, seed, args.budget) for seed in range(args.seeds)]
        ms = np.concatenate([r.ms for r in runs])
        late = np.concatenate([r.late_ms for r in runs])
        row = {"median_ms": float(np.median(ms)), "p95_ms": float(np.quantile(ms, 0.95)),
               "late_p95_ms": float(np.quantile(late, 0.95)) if len(late) else None,
               "max_ms": float(ms.max()), "proposals": len(ms)}
        report["searches"][search] = row
        print(f"{search:>10} {row['median_ms']:8.2f} {row['p95_ms']:8.2f} "
              f"{row['late_p95_ms'] or float('nan'):14.2f} {row['max_ms']:8.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
