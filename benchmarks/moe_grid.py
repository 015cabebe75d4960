"""Fused MoE per batch size: measurements the default search needs to reach the best config of
the full grid, against the grid's size — what vLLM's and SGLang's grid-search scripts measure
per M. ON THE TRITON INTERPRETER (the CPU) here: the times are the interpreter's, not a GPU's.

For each ``M``, every config of the built-in ``fused_moe`` space that differs on the
interpreter is measured once (``BLOCK_SIZE_M/N/K`` × ``GROUP_SIZE_M`` valid for the problem;
``num_warps`` and ``num_stages`` change nothing the interpreter runs, so the grid counted is
that product, and the script says how large the full GPU grid would be). The table is written
as a Kernel Tuner cache file, then the service's default search and random search (Optuna's,
same run, the baseline a grid search is closest to) are run on it, seed by seed, until each has
measured the grid's best config (``benchmarks/search_runs.py``, the replay contract). Prints a
table; writes JSON.

    python benchmarks/moe_grid.py --ms 1,8,32,128 --seeds 20 --out benchmarks/results/moe_grid.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_INTERPRET", "1")

SHAPE = {"E": 8, "N": 64, "K": 64, "topk": 2}
KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M")


def measure_grid(m: int, reps: int) -> dict[str, Any]:
    """Median ms of every interpreter-distinct valid config for batch size ``m``."""
    import torch

    from search_spaces import Context
    from search_spaces.moe import GRID
    from tuner.kernels.moe import FUSED_MOE

    problem = {"M": m, **SHAPE}
    ctx = Context(problem, "fp16")
    tensors = FUSED_MOE.make_inputs(problem, "fp16", 0, "cpu")
    expected = FUSED_MOE.reference(tensors, problem)
    cache: dict[str, dict[str, Any]] = {}
    values = {k: GRID[k] for k in KEYS}
    for combo in itertools.product(*values.values()):
        config = {**dict(zip(KEYS, combo, strict=True)), "num_warps": 4, "num_stages": 2}
        if FUSED_MOE.space.violations(config, ctx):
            continue
        FUSED_MOE.launch(tensors, problem, config)  # warm-up, and the check
        torch.testing.assert_close(tensors["c"].float(), expected, rtol=2e-2, atol=2e-2)
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            FUSED_MOE.launch(tensors, problem, config)
            times.append((time.perf_counter() - start) * 1e3)
        key = ",".join(str(config[k]) for k in KEYS)
        cache[key] = {**{k: config[k] for k in KEYS}, "time": statistics.median(times),
                      "times": times}
    return {"tune_params_keys": list(KEYS),
            "tune_params": {k: list(values[k]) for k in KEYS}, "cache": cache,
            "problem_size": [m], "kernel_name": "fused_moe",
            "device_name": "Triton interpreter (CPU)"}


def to_best(path: str, search: str, seed: int, budget: int) -> int | None:
    """Measurements until ``search`` measured the recording's best config (None: never)."""
    from benchmarks.search_runs import simulate

    curve = simulate(path, search, seed, budget).curve
    return next((i + 1 for i, best in enumerate(curve) if best >= 1.0), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ms", default="1,8,32,128",
                        help="batch sizes M, comma-separated (default: 1,8,32,128)")
    parser.add_argument("--seeds", type=int, default=20, help="runs per search (default: 20)")
    parser.add_argument("--reps", type=int, default=3,
                        help="timed launches per config (default: 3)")
    parser.add_argument("--out", type=Path, default=Path("moe_grid.json"),
                        help="JSON file to write (default: ./moe_grid.json)")
    args = parser.parse_args()
    from search_spaces.moe import grid_size

    report: dict[str, Any] = {"device": "Triton interpreter (CPU): times are not a GPU's",
                              "shape": SHAPE, "full_gpu_grid": grid_size(),
                              "host": platform.node(), "date": time.strftime("%Y-%m-%d"),
                              "seeds": args.seeds, "per_m": {}}
    print(f"fused_moe {SHAPE}, on the Triton interpreter; the full GPU grid has "
          f"{grid_size()} configs")
    print(f"{'M':>5} {'grid':>5} {'default p50':>12} {'p90':>5} {'max':>5} "
          f"{'random p50':>11} {'p90':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        for m in (int(x) for x in args.ms.split(",")):
            recording = measure_grid(m, args.reps)
            path = Path(tmp) / f"moe_M{m}.json"
            path.write_text(json.dumps(recording))
            size = len(recording["cache"])
            runs = {search: [to_best(str(path), search, seed, size)
                             for seed in range(args.seeds)]
                    for search in ("default", "random")}
            row: dict[str, Any] = {"grid": size}
            for search, found in runs.items():
                counts = sorted(size if n is None else n for n in found)
                row[search] = {"runs": found, "p50": statistics.median(counts),
                               "p90": counts[int(0.9 * (len(counts) - 1))],
                               "max": counts[-1], "never": found.count(None)}
            report["per_m"][str(m)] = row
            d, r = row["default"], row["random"]
            print(f"{m:>5} {size:>5} {d['p50']:>12.1f} {d['p90']:>5} {d['max']:>5} "
                  f"{r['p50']:>11.1f} {r['p90']:>5}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
