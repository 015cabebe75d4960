"""Search efficiency on recorded tuning spaces, held out: the fraction of the optimum each
search reaches after B measured configurations, the default's lead over the best peer, the
budget spent on failing configs, and CPU milliseconds per proposal — all in one run.

Definitions (``benchmarks/data/replay/README.md``, ``benchmarks/search_runs.py``): budget B =
distinct recorded configs measured (succeeded or failed); invalid proposals and repeats are
free. Fraction at B = best time of the whole space / best time among the first B measured.

The default's figures are **held out**: every candidate set of constants
(``benchmarks.search_runs.VARIANTS``) runs on every file, and the figure for a file is the
candidate chosen on the *other* files (leave one file out) or on the other kernel families
(leave one family out) — ``benchmarks/search_heldout.py``. Peers: random (exact
expectation), Optuna's TPE and GP samplers, and Kernel Tuner's strategies in simulation mode
(``pip install -e '.[benchmarks]'``; skipped with a note when it is not installed).

    python benchmarks/search_efficiency.py                        # all ten recordings
    python benchmarks/search_efficiency.py path/to/cache.json.gz   # any Kernel Tuner cache file
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

# One BLAS thread per process: the pool already fills every core.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import search_heldout as ho  # noqa: E402
from benchmarks.saved import load_report  # noqa: E402
from benchmarks.search_peers import KT_STRATEGIES  # noqa: E402
from benchmarks.search_peers import random_exact  # noqa: E402
from benchmarks.search_runs import VARIANTS  # noqa: E402
from benchmarks.search_runs import Run  # noqa: E402
from benchmarks.search_runs import recording  # noqa: E402
from benchmarks.search_runs import shipped_variant  # noqa: E402
from benchmarks.search_runs import simulate  # noqa: E402

BUDGETS = (10, 20, 50, 100, 200)
CANDIDATES = [f"v:{v}" for v in VARIANTS]


def _task(args: tuple[str, str, int, int]) -> tuple[str, str, Run, float]:
    path, search, seed, budget = args
    start = time.perf_counter()
    run = simulate(path, search, seed, budget)
    return path, search, run, time.perf_counter() - start


def cell_stats(runs: list[Run], b: int) -> dict[str, float]:
    at_b = np.array([r.curve[b - 1] for r in runs])
    return {"mean": float(at_b.mean()), "p10": float(np.quantile(at_b, 0.1)),
            "se": float(at_b.std(ddof=1) / np.sqrt(len(at_b))) if len(at_b) > 1 else 0.0,
            "failed_share": float(np.mean([r.failed[b - 1] / b for r in runs]))}


def cost_stats(runs: list[Run]) -> dict[str, float]:
    ms = np.concatenate([r.ms for r in runs]) if runs else np.zeros(0)
    late = np.concatenate([r.late_ms for r in runs]) if runs else np.zeros(0)
    return {"p50_ms": float(np.median(ms)) if len(ms) else 0.0,
            "p95_ms": float(np.quantile(ms, 0.95)) if len(ms) else 0.0,
            "late_p95_ms": float(np.quantile(late, 0.95)) if len(late) else float("nan")}


def heldout_table(stats: dict[str, Any], peers: list[str], by: str,
                  candidates: list[str]) -> dict[str, Any]:
    """Per file and B: the held-out pick's figures, the best peer, the lead and the verdict
    (one candidate: that one everywhere, e.g. the shipped default on files it never saw)."""
    pick = ho.held_out(stats, candidates, by) if len(candidates) > 1 else {
        name: candidates[0] for name in stats}
    out: dict[str, Any] = {}
    for name, per_search in stats.items():
        rows = {}
        for b in map(str, BUDGETS):
            ours = per_search[pick[name]][b]
            peer = ho.best_peer(per_search, peers, b)
            lead, two_se, verdict = ho.verdict(ours, per_search[peer][b])
            rows[b] = {**ours, "best_peer": peer, "peer_mean": per_search[peer][b]["mean"],
                       "lead": lead, "two_se": two_se, "verdict": verdict}
        out[name] = {"chosen": pick[name], "cells": rows}
    return out


def print_file(name: str, per_search: dict[str, Any], loo: dict[str, Any],
               lofo: dict[str, Any], searches: list[str]) -> None:
    print(f"\n{name}  (mean / p10 of the fraction of the optimum; default held out: "
          f"leave-one-file-out pick {loo['chosen']}, leave-one-family-out pick {lofo['chosen']})")
    head = f"{'B':>4} {'default LOO':>13} {'LOFO':>13} " + " ".join(
        f"{s[:13]:>13}" for s in searches) + f"  {'best peer':>22} {'LOO lead ± 2 se':>19}"
    print(head)
    for b in map(str, BUDGETS):
        c, f = loo["cells"][b], lofo["cells"][b]
        print(f"{b:>4} {c['mean']:.3f}/{c['p10']:.3f} {f['mean']:.3f}/{f['p10']:.3f} " + " ".join(
            f"{per_search[s][b]['mean']:.3f}/{per_search[s][b]['p10']:.3f}" for s in searches)
            + f"  {c['best_peer'][:22]:>22} {c['lead']:+.4f} ± {c['two_se']:.4f} {c['verdict']}")


def summary(stats: dict[str, Any], table: dict[str, Any], peers: list[str]) -> dict[str, Any]:
    """Verdict counts, the worst file per B, and the issue's B = 50 goal."""
    counts = {v: 0 for v in ho.VERDICTS}
    for entry in table.values():
        for cell in entry["cells"].values():
            counts[cell["verdict"]] += 1
    worst = {b: min(((n, e["cells"][b]["mean"]) for n, e in table.items()), key=lambda t: t[1])
             for b in map(str, BUDGETS)}
    goal = {n: {"default_at_50": e["cells"]["50"]["mean"],
                "peer_reaches_0.90": any(stats[n][p]["50"]["mean"] >= 0.90 for p in peers
                                         if p in stats[n])}
            for n, e in table.items()}
    misses = [n for n, g in goal.items() if g["peer_reaches_0.90"] and g["default_at_50"] < 0.97]
    return {"verdicts": counts, "worst_file": worst, "b50_goal_misses": misses}


def markdown(report: dict[str, Any]) -> str:
    """The README's tables from a saved report: per file and B, the held-out default (leave
    one file out; leave one family out), the best peer, the lead and the verdict; then the
    share of the budget spent on failing configs at B = 200."""
    loo = report["held_out"]["leave_one_file_out"]
    lofo = report["held_out"]["leave_one_family_out"]
    lines = ["| space | B | default, file held out | default, family held out | best peer "
             "| lead ± 2 se | verdict |", "|---|---|---|---|---|---|---|"]
    for name in sorted(loo):
        for b in map(str, report["budgets"]):
            c, f = loo[name]["cells"][b], lofo[name]["cells"][b]
            lines.append(f"| {name} | {b} | {c['mean']:.3f} / {c['p10']:.3f} | "
                         f"{f['mean']:.3f} / {f['p10']:.3f} | {c['best_peer']} "
                         f"{c['peer_mean']:.3f} | {c['lead']:+.3f} ± {c['two_se']:.3f} | "
                         f"{c['verdict']} |")
    shipped = report.get("shipped_default", report["chosen_on_all_files"])
    peers = sorted({s for per in report["spaces"].values() for s in per if s[:2] != "v:"})
    searches = [shipped, *peers]
    lines += ["", "| space | " + " | ".join(searches) + " |",
              "|---|" + "---|" * len(searches)]
    for name, per in sorted(report["spaces"].items()):
        if not any(cells[str(max(report["budgets"]))]["failed_share"] for cells in per.values()):
            continue  # nothing fails here
        lines.append(f"| {name} | " + " | ".join(
            f"{per[s][str(max(report['budgets']))]['failed_share']:.3f}" if s in per else "-"
            for s in searches) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="Kernel Tuner cache files "
                        "(default: every recording in benchmarks/data/replay)")
    parser.add_argument("--seeds", type=int, default=20, help="seeds per (file, search)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds FIRST, FIRST + 1, …; the default's constants were chosen on "
                        "seeds 0-19, where it measures about 0.03 above other seeds at B = 10 "
                        "and 20: give e.g. 5000 for figures no choice has seen")
    parser.add_argument("--gp-seeds", type=int, default=10,
                        help="seeds for Optuna's GPSampler (about 1 minute of CPU per run)")
    parser.add_argument("--peers", default=",".join(["tpe", "gp"] + [
        f"kt:{s}" for s in KT_STRATEGIES]), help="peer searches besides exact random")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "search_efficiency.json")
    parser.add_argument("--shipped", action="store_true",
                        help="run only the shipped default (its constants were chosen on the "
                        "ten recordings): for files it has never seen")
    parser.add_argument("--candidates", default=",".join(VARIANTS),
                        help="candidate constants of the default to run (names of "
                        "benchmarks/search_runs.py VARIANTS)")
    parser.add_argument("--merge", type=Path, metavar="JSON",
                        help="a saved report on the same files and seeds: its figures for the "
                        "searches this run does not run are kept (selection uses both)")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="print the README's tables from a saved report; run nothing")
    args = parser.parse_args()
    if args.render:
        print(markdown(load_report(parser, args.render)))
        return
    files = [str(f) for f in args.files] or sorted(
        str(f) for f in (ROOT / "benchmarks" / "data" / "replay").glob("*.json*"))
    for f in files:  # a bad path is one line, not a traceback from a pool worker
        try:
            recording(f)
        except (OSError, ValueError) as exc:
            parser.exit(2, f"error: {f}: {exc}\n")
    peers = [p for p in args.peers.split(",") if p]
    if any(p.startswith("kt:") for p in peers) and importlib.util.find_spec("kernel_tuner") \
            is None:
        print("note: Kernel Tuner is not installed (pip install -e '.[benchmarks]'): "
              "its strategies are left out of this run")
        peers = [p for p in peers if not p.startswith("kt:")]
    unknown = [c for c in args.candidates.split(",") if c and c not in VARIANTS]
    if unknown:
        parser.exit(2, f"error: unknown candidate(s) {', '.join(unknown)} "
                    f"(choose from {', '.join(VARIANTS)})\n")
    candidates = [f"v:{shipped_variant()}"] if args.shipped else [
        f"v:{c}" for c in args.candidates.split(",") if c]
    searches = candidates + peers
    tasks = [(f, s, seed, max(BUDGETS)) for f in files for s in searches
             for seed in range(args.first_seed, args.first_seed
                               + (args.gp_seeds if s == "gp" else args.seeds))]
    tasks.sort(key=lambda t: t[1] != "gp")  # the slow ones first, so the pool ends together
    runs: dict[str, dict[str, list[Run]]] = {}
    seconds: dict[str, float] = {}
    done = 0
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for path, search, run, took in pool.imap_unordered(_task, tasks):
            runs.setdefault(path, {}).setdefault(search, []).append(run)
            seconds[search] = seconds.get(search, 0.0) + took
            done += 1
            if done % 50 == 0 or done == len(tasks):
                print(f"  {done}/{len(tasks)} runs", file=sys.stderr, flush=True)
    names = {f: Path(f).name.split(".json")[0] for f in files}
    stats: dict[str, Any] = {}
    for f in files:
        per = {s: {str(b): cell_stats(rs, b) for b in BUDGETS}
               for s, rs in runs.get(f, {}).items()}
        per["random"] = random_exact(recording(f), BUDGETS)
        stats[names[f]] = per
    kept: dict[str, Any] = {}
    if args.merge:
        kept = load_report(parser, args.merge)
        for name, per in stats.items():
            for search, cells in kept["spaces"][name].items():
                per.setdefault(search, cells)
    present = stats[names[files[0]]]
    candidates = [c for c in CANDIDATES if c in present] if not args.shipped else candidates
    peers = ["random", *[p for p in present if not p.startswith("v:") and p != "random"]]
    loo = heldout_table(stats, peers, "file", candidates)
    lofo = heldout_table(stats, peers, "family", candidates)
    for f in files:
        print_file(names[f], stats[names[f]], loo[names[f]], lofo[names[f]], peers)
    report: dict[str, Any] = {
        "budgets": BUDGETS, "seeds": args.seeds, "first_seed": args.first_seed,
        "gp_seeds": args.gp_seeds,
        "candidates": {c: VARIANTS[c[2:]] for c in candidates}, "spaces": stats,
        "held_out": {"leave_one_file_out": loo, "leave_one_family_out": lofo},
        "summary": {"leave_one_file_out": summary(stats, loo, peers),
                    "leave_one_family_out": summary(stats, lofo, peers)},
        "chosen_on_all_files": ho.choose(stats, candidates, list(stats)),
        "shipped_default": f"v:{shipped_variant()}",
        "cost": {**kept.get("cost", {}), **{
            s: cost_stats([r for f in files for r in runs[f].get(s, [])]) for s in searches}},
        "seconds_per_run": {**kept.get("seconds_per_run", {}), **{
            s: seconds[s] / sum(len(runs[f].get(s, [])) for f in files) for s in seconds}},
        "merged": {"from": str(args.merge), "run_now": searches} if args.merge else None}
    for kind, summ in report["summary"].items():
        print(f"\n{kind}: default vs the best peer in {sum(summ['verdicts'].values())} cells: "
              + ", ".join(f"{n} {v}" for v, n in summ["verdicts"].items())
              + f"; below 0.97 at B = 50 where a peer reaches 0.90: "
              f"{', '.join(summ['b50_goal_misses']) or 'none'}")
    print(f"constants chosen on all files (the shipped default): "
          f"{report['chosen_on_all_files']}")
    print("CPU ms per proposal (p50 / p95 / p95 with >= 150 observations; Kernel Tuner: wall "
          "ms of strategy + framework):")
    for s, c in report["cost"].items():
        print(f"  {s:>24} {c['p50_ms']:7.2f} {c['p95_ms']:7.2f} {c['late_p95_ms']:7.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
