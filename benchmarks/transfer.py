"""Transfer on PREDICTED times: does starting from related problems' best configs pay?

No GPU runs here. Every time below is the matmul kernel's analytic model (the ``model:<gpu>``
backend) for one GPU kind, standing in for measurements; the fraction at B is the best
predicted time of the whole valid space / the best predicted time among the first B configs
the search measured (the definition of ``benchmarks/search_efficiency.py``).

For each target shape, the database is taken to hold the best (predicted) config of every
*other* shape of the set; ``tuner.search.transfer`` picks the ones to start from exactly as a
job would. The default search then runs with those (``transfer``) and without them
(``no transfer``), over ``--seeds`` seeds, with the model prior switched off (a kernel without a
model, or a GPU whose measurements the model does not match, starts from nothing else).

    python benchmarks/transfer.py --device h100-sxm --dtype bf16 --seeds 20
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_spaces import Context  # noqa: E402
from search_spaces import canonical_json  # noqa: E402
from tuner.control.searches import make_proposer  # noqa: E402
from tuner.core.devices.datasheets import device_spec  # noqa: E402
from tuner.core.devices.datasheets import target_limits  # noqa: E402
from tuner.kernels import resolve_kernel  # noqa: E402
from tuner.search.candidates import valid_candidates  # noqa: E402
from tuner.search.transfer import StoredBest  # noqa: E402
from tuner.search.transfer import transfer_configs  # noqa: E402

BUDGETS = (1, 3, 5, 10, 20)
#: Square, flat and skinny shapes; each is a target once, the others its "database".
SHAPES = ("M=512,N=512,K=512", "M=1024,N=1024,K=1024", "M=2048,N=512,K=2048",
          "M=3072,N=3072,K=3072", "M=4096,N=4096,K=4096", "M=6144,N=1024,K=4096",
          "M=256,N=256,K=8192", "M=128,N=8192,K=1024", "M=64,N=4096,K=4096",
          "M=16,N=4096,K=4096")


def _shape(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (part.split("=") for part in text.split(","))}


class PredictedSpace:
    """Every valid config of one problem with its predicted time (ms)."""

    def __init__(self, problem: dict[str, int], dtype: str, device: str) -> None:
        self.kernel = resolve_kernel("matmul", f"model:{device}", (ROOT,))
        self.ctx = Context(problem, dtype, target_limits(device))
        self.problem, self.dtype, self.device = problem, dtype, device
        spec = device_spec(device)
        assert spec is not None and self.kernel.model is not None
        configs = valid_candidates(self.kernel.space, self.ctx, np.random.default_rng(0))
        self.ms = {canonical_json(c): self.kernel.model(problem, dtype, c, spec, None)
                   for c in configs}
        best_key = min(self.ms, key=self.ms.__getitem__)
        self.best_ms = self.ms[best_key]
        self.best_config = json.loads(best_key)

    def curve(self, seed: int, warm: list[dict[str, Any]], budget: int) -> list[float]:
        """Best fraction of the optimum after each of ``budget`` measured configs."""
        # The service's default search as a job builds it (hedged when ``warm`` is not empty).
        search = make_proposer("auto", self.kernel.space, self.ctx, seed, warm_start=warm)
        best, out = 0.0, []
        for _ in range(budget):
            asked = search.ask()
            if asked is None:
                break
            fraction = self.best_ms / self.ms[canonical_json(asked.config)]
            search.tell(asked.number, fraction)
            best = max(best, fraction)
            out.append(best)
        return out + [best] * (budget - len(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="h100-sxm")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--transfer", type=int, default=3, help="configs to start from")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "transfer.json")
    args = parser.parse_args()
    spaces = {s: PredictedSpace(_shape(s), args.dtype, args.device) for s in SHAPES}
    budget = max(BUDGETS)
    report: dict[str, Any] = {"predicted": True, "model": f"matmul analytic model, {args.device}",
                              "dtype": args.dtype, "budgets": BUDGETS, "seeds": args.seeds,
                              "shapes": {}}
    print(f"PREDICTED (analytic model for {args.device}, no GPU): fraction of the optimum "
          f"after B configs, mean over {args.seeds} seeds")
    print(f"{'target shape':24} {'search':12} " + " ".join(f"B={b:<4}" for b in BUDGETS))
    totals: dict[str, list[np.ndarray]] = {"transfer": [], "no transfer": []}
    for name, space in spaces.items():
        stored = [StoredBest(other.problem, args.device, other.best_config)
                  for other_name, other in spaces.items() if other_name != name]
        warm = transfer_configs(stored, space.problem, args.device, args.transfer)
        rows: dict[str, Any] = {}
        for label, start in (("transfer", warm), ("no transfer", [])):
            curves = np.array([space.curve(seed, start, budget) for seed in range(args.seeds)])
            means = curves.mean(0)
            totals[label].append(means)
            rows[label] = {str(b): float(means[b - 1]) for b in BUDGETS}
            print(f"{name:24} {label:12} " + " ".join(f"{means[b - 1]:.3f} " for b in BUDGETS))
        report["shapes"][name] = rows
    print(f"{'mean of all shapes':24}")
    for label, rows_ in totals.items():
        means = np.mean(rows_, axis=0)
        report.setdefault("mean", {})[label] = {str(b): float(means[b - 1]) for b in BUDGETS}
        print(f"{'':24} {label:12} " + " ".join(f"{means[b - 1]:.3f} " for b in BUDGETS))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
