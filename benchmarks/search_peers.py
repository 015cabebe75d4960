"""The peers of the default search on a recorded space, under the project's budget definition.

* **random** — uniform sampling without replacement, as its *exact* expectation: proposals of
  configs absent from the recording are free, so random search is a uniform draw of B recorded
  configs (succeeded or failed); the best of B then has a closed-form distribution (no seeds).
* **Kernel Tuner strategies** — Kernel Tuner's own strategies in its simulation mode on the
  same cache file (``pip install '.[benchmarks]'``; optional: the service does not depend on
  it). Fairness: Kernel Tuner is told, as a restriction, exactly the configs present in the
  recording — succeeded *or failed* — which is what our searches know as "statically valid"
  (Kernel Tuner's own ``tune_cache`` would hide the failed configs, handing it knowledge no
  search has before measuring). Its ``max_fevals`` counts distinct evaluated configs of the
  cache, the same budget B; repeats are free for it too. A strategy that stops before B keeps
  its best for the rest of the budget.

Optuna's samplers run through the service's own proposer (``benchmarks/search_runs.py``).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import math
import os
import random
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from search_spaces.recorded import Recording

#: Kernel Tuner strategies the harness runs (``--searches kt:<name>`` runs any other).
KT_STRATEGIES = ("dual_annealing", "genetic_algorithm", "pso", "simulated_annealing",
                 "diff_evo")


def fractions_of(rec: Recording) -> np.ndarray:
    """Fraction of the optimum of every recorded config (0 for a failed one)."""
    best = rec.best_time_ms()
    out = []
    for entry in rec.entries.values():
        t = entry.get("time")
        out.append(best / t if isinstance(t, int | float) and t > 0 else 0.0)
    return np.array(out)


def random_exact(rec: Recording, budgets: tuple[int, ...]) -> dict[str, dict[str, float]]:
    """Mean and 10th percentile of the best fraction among B configs drawn uniformly without
    replacement from the recording, exactly (standard error 0), and the expected share of the
    budget spent on failed configs."""
    f = np.sort(fractions_of(rec))[::-1]  # best first
    n = len(f)
    failed_share = float((f == 0).mean())
    out: dict[str, dict[str, float]] = {}
    for b in budgets:
        b = min(b, n)
        # P(the best of the draw is the k-th best, k = 1..n) = C(n-k, b-1) / C(n, b)
        k = np.arange(1, n + 1)
        log_p = np.full(n, -math.inf)
        ok = n - k >= b - 1
        log_p[ok] = [_log_comb(n - kk, b - 1) - _log_comb(n, b) for kk in k[ok]]
        p = np.exp(log_p)
        mean = float((p * f).sum())
        below = np.cumsum(p[::-1])[::-1]  # P(best <= f[k]) = P(best is the k-th or worse)
        p10 = float(f[np.flatnonzero(below >= 0.1)].min())
        out[str(b)] = {"mean": mean, "p10": p10, "se": 0.0, "failed_share": failed_share}
    return out


def _log_comb(n: int, r: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)


def _plain_json(path: str) -> str:
    """Kernel Tuner reads plain JSON: a gzip recording is unpacked once into the temp dir."""
    if not path.endswith(".gz"):
        return path
    digest = hashlib.sha1(Path(path).read_bytes()).hexdigest()[:16]
    plain = Path(tempfile.gettempdir()) / f"tuner-replay-{digest}.json"
    if not plain.exists():  # worker processes may race here: each writes its own part file
        tmp = plain.with_suffix(f".{os.getpid()}.part")
        tmp.write_bytes(gzip.decompress(Path(path).read_bytes()))
        tmp.replace(plain)
    return str(plain)


def kt_run(path: str, rec: Recording, strategy: str, seed: int, budget: int,
           ) -> tuple[list[float], list[int], list[float]]:
    """One Kernel Tuner run: best fraction after each distinct measured config and failed
    configs among the first b measured (both of length ``budget``), and per-proposal strategy
    time (ms)."""
    from kernel_tuner import util  # optional dependency: imported only when asked for
    from kernel_tuner.interface import tune_kernel

    plain = _plain_json(path)
    cache = util.read_cache(plain, open_cache=False)
    keys = cache["tune_params_keys"]
    present = {tuple(r[k] for k in keys) for r in cache["cache"].values()}

    def recorded(*values: Any) -> bool:
        return values in present

    args = util.infer_args_from_cache(cache)
    random.seed(seed)
    np.random.seed(seed)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        results, _env = tune_kernel(
            **args, cache=plain, restrictions=[util.FunctionConstraint(recorded)],
            simulation_mode=True, strategy=strategy, quiet=True,
            strategy_options={"max_fevals": budget})
    best_ms = rec.best_time_ms()
    seen: set[str] = set()
    curve: list[float] = []
    failed: list[int] = []
    best = 0.0
    failures = 0
    ms: list[float] = []
    for r in results:
        if r is None:
            continue
        ms.append(float(r.get("strategy_time", 0.0)) + float(r.get("framework_time", 0.0)))
        key = rec.key_of(r)
        if key in seen or key not in rec.entries or len(curve) >= budget:
            continue
        seen.add(key)
        t = r.get("time")
        ok = isinstance(t, int | float) and "__error__" not in r and t > 0
        failures += 0 if ok else 1
        best = max(best, best_ms / t if ok else 0.0)
        curve.append(best)
        failed.append(failures)
    pad = budget - len(curve)
    return curve + [best] * pad, failed + [failures] * pad, ms

