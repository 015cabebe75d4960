"""Why Kernel Tuner's differential evolution starts well on a GEMM recording: the best of its
first ten configs against ten uniform draws among the valid configs.

Differential evolution's first population is ``Searchspace.get_LHS_sample_indices(popsize)``:
a Latin hypercube over each parameter's value indices, each point snapped to the nearest valid
config by the sum of index differences, ties to the first config of Kernel Tuner's list (its
constraint solver orders the list largest values first). This script draws that sample with
Kernel Tuner's own ``Searchspace`` (``--popsize`` points, ``16 × parameters`` as its default)
and reports, over ``--reps`` repetitions, the mean fraction of the optimum of the best of ten
of its points (taken at random, so the order in which Kernel Tuner evaluates them plays no
part), of its first ten in Kernel Tuner's order, and of ten uniform draws among the valid
configs; and, per parameter, each value's share among the sampled points and among the valid
configs. Needs ``pip install -e '.[benchmarks]'``.

    python benchmarks/kernel_tuner_start.py benchmarks/data/replay/gemm_RTX_2080_Ti.json.gz
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.search_peers import _plain_json  # noqa: E402
from search_spaces.recorded import load_recording  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="a Kernel Tuner cache file")
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--popsize", type=int, default=0, help="0: 16 × tunable parameters")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "kernel_tuner_start.json")
    args = parser.parse_args()
    from kernel_tuner import util  # optional dependency
    from kernel_tuner.searchspace import Searchspace

    rec = load_recording(args.file)
    cache = util.read_cache(_plain_json(str(args.file)), open_cache=False)
    keys = cache["tune_params_keys"]
    present = {tuple(r[k] for k in keys) for r in cache["cache"].values()}
    space = Searchspace({k: cache["tune_params"][k] for k in keys},
                        [util.FunctionConstraint(lambda *v: v in present)], 1024)
    best = rec.best_time_ms()

    def fraction(config: tuple[Any, ...]) -> float:
        t = rec.entries[",".join(map(str, config))]["time"]
        return best / t if isinstance(t, int | float) and t > 0 else 0.0

    tunable = [k for k in keys if len(cache["tune_params"][k]) > 1]
    popsize = args.popsize or 16 * len(tunable)
    rng = np.random.default_rng(0)
    some, first, uniform = [], [], []
    counts: dict[str, dict[str, int]] = {k: {} for k in tunable}
    warnings.simplefilter("ignore")
    for rep in range(args.reps):
        np.random.seed(rep)
        sample = [space.list[i] for i in space.get_LHS_sample_indices(popsize)]
        values = [fraction(c) for c in sample]
        some.append(max(rng.choice(values, 10, replace=False)))
        first.append(max(values[:10]))
        uniform.append(max(fraction(space.list[i])
                           for i in rng.choice(space.size, 10, replace=False)))
        for c in sample:
            for j, k in enumerate(keys):
                if k in counts:
                    counts[k][str(c[j])] = counts[k].get(str(c[j]), 0) + 1
    valid = {k: {str(v): sum(1 for c in space.list if str(c[keys.index(k)]) == str(v))
                 / space.size for v in cache["tune_params"][k]} for k in tunable}
    shares = {k: {v: n / sum(c.values()) for v, n in sorted(c.items())} for k, c in counts.items()}
    report = {"file": args.file.name, "popsize": popsize, "reps": args.reps,
              "best_of_ten": {"ten of the sample": float(np.mean(some)),
                              "first ten in Kernel Tuner's order": float(np.mean(first)),
                              "ten uniform draws": float(np.mean(uniform))},
              "value_shares": {k: {v: {"sample": shares[k].get(v, 0.0), "valid": valid[k][v]}
                                   for v in valid[k]} for k in tunable}}
    print(f"{args.file.name}: best of ten, mean over {args.reps} repetitions")
    for name, value in report["best_of_ten"].items():
        print(f"  {name:>34} {value:.3f}")
    print("value shares, sample / valid configs:")
    for k in tunable:
        print(f"  {k:>10} " + "  ".join(f"{v}: {shares[k].get(v, 0.0):.2f}/{valid[k][v]:.2f}"
                                        for v in valid[k]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
