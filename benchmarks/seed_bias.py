"""Are the default search's figures on seeds 0-19 what it does on any seeds?

The default's constants (``tuner.search.model_search``) were chosen, stop after stop, on runs
with seeds 0-19. Files of one kernel family share a grid, and a seed draws the same random
picks on each, so a choice made on some files with those seeds can be lucky on the others with
the same seeds. This runs the shipped default on the same files with ``--seeds`` seeds from each
start of ``--starts`` (0 = the seeds every choice saw) and prints, per file and over all files,
the mean fraction of the optimum at each budget, and each range's difference from the first
(mean over files ± the standard error of that mean over files).

    python benchmarks/seed_bias.py --starts 0,1000,2000,5000 \
        --peers-from benchmarks/results/search_efficiency.json

``--peers-from`` (a ``benchmarks/search_efficiency.py`` report on the same files) also prints,
per file and budget, the default on every range but the first, pooled, against the best peer of
that report (peers' seeds never chose anything): ahead / within / behind by two standard errors,
beside the same verdict for the report's own default (seeds 0-19).
    python benchmarks/seed_bias.py --starts 0,5000 hub/*.json.gz
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

from benchmarks.saved import load_report  # noqa: E402
from benchmarks.search_runs import recording  # noqa: E402
from benchmarks.search_runs import shipped_variant  # noqa: E402
from benchmarks.search_runs import simulate  # noqa: E402

BUDGETS = (10, 20, 50)


def _task(args: tuple[str, int]) -> tuple[str, int, list[float]]:
    path, seed = args
    return path, seed, simulate(path, "default", seed, max(BUDGETS)).curve


def _se(curves: list[list[float]]) -> list[float]:
    """Standard error of the mean fraction at each budget."""
    at = np.array(curves)[:, [b - 1 for b in BUDGETS]]
    return (at.std(0, ddof=1) / np.sqrt(len(at))).tolist() if len(at) > 1 else [0.0] * len(BUDGETS)


def _verdict(lead: float, two_se: float) -> str:
    return "ahead" if lead > two_se else "behind" if lead < -two_se else "within"


def verdicts(saved: dict[str, Any], report: dict[str, Any]) -> dict[str, int | dict[str, int]]:
    """Ahead / within / behind the saved report's best peer per (file, B): the saved default
    (seeds 0-19) and this run's later ranges pooled. Prints one line per cell."""
    counts: dict[str, dict[str, int]] = {"saved": {}, "other seeds": {}}
    later = [str(s) for s in report["starts"][1:]]
    for name, ranges in report["files"].items():
        per = saved["spaces"][name]
        chosen = saved["held_out"]["leave_one_file_out"][name]["chosen"]
        for i, b in enumerate(map(str, BUDGETS)):
            peers = {k: v[b] for k, v in per.items() if not k.startswith("v:")}
            peer = max(peers, key=lambda k: peers[k]["mean"])
            p_mean, p_se = peers[peer]["mean"], peers[peer].get("se", 0.0)
            mean = float(np.mean([ranges[s]["mean"][i] for s in later]))
            se = float(np.sqrt(sum(ranges[s]["se"][i] ** 2 for s in later)) / len(later))
            old = per[chosen][b]
            was = _verdict(old["mean"] - p_mean, 2 * float(np.hypot(old["se"], p_se)))
            now = _verdict(mean - p_mean, 2 * float(np.hypot(se, p_se)))
            counts["saved"][was] = counts["saved"].get(was, 0) + 1
            counts["other seeds"][now] = counts["other seeds"].get(now, 0) + 1
            print(f"{name:24} B={b:>3}  seeds 0-19 {old['mean']:.3f} {was:6}  other seeds "
                  f"{mean:.3f} ± {se:.3f} {now:6}  best peer {peer} {p_mean:.3f}")
    print(f"seeds 0-19: {counts['saved']}; other seeds: {counts['other seeds']}")
    return {"cells": sum(counts["saved"].values()), **counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="Kernel Tuner cache files "
                        "(default: every recording in benchmarks/data/replay)")
    parser.add_argument("--starts", default="0,1000,2000,5000",
                        help="first seed of each range; the first range is the reference")
    parser.add_argument("--seeds", type=int, default=20, help="seeds per range and file")
    parser.add_argument("--peers-from", type=Path, metavar="JSON",
                        help="a search_efficiency.py report on these files: verdicts against "
                        "its best peer")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "seed_bias.json")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="a saved report of this script: with --peers-from, add the "
                        "verdicts to it; run nothing")
    args = parser.parse_args()
    if args.render:
        if not args.peers_from:
            parser.exit(2, "error: --render needs --peers-from\n")
        saved = load_report(parser, args.render)
        saved["verdicts"] = verdicts(load_report(parser, args.peers_from), saved)
        args.render.write_text(json.dumps(saved, indent=1) + "\n")
        return
    try:
        starts = [int(s) for s in args.starts.split(",") if s]
    except ValueError:
        parser.exit(2, f"error: --starts takes integers, not {args.starts!r}\n")
    if len(starts) < 2:
        parser.exit(2, "error: --starts needs two or more seed ranges\n")
    if any(b - a < args.seeds for a, b in zip(sorted(starts), sorted(starts)[1:], strict=False)):
        parser.exit(2, f"error: seed ranges of {args.seeds} seeds from {args.starts} overlap\n")
    files = [str(f) for f in args.files] or sorted(
        str(f) for f in (ROOT / "benchmarks" / "data" / "replay").glob("*.json*"))
    for f in files:
        try:
            recording(f)
        except (OSError, ValueError) as exc:
            parser.exit(2, f"error: {f}: {exc}\n")
    tasks = [(f, start + i) for f in files for start in starts for i in range(args.seeds)]
    curves: dict[tuple[str, int], list[list[float]]] = {}
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for done, (path, seed, curve) in enumerate(
                pool.imap_unordered(_task, tasks, chunksize=2), start=1):
            start = max(s for s in starts if s <= seed)
            curves.setdefault((path, start), []).append(curve)
            if done % 50 == 0 or done == len(tasks):
                print(f"  {done}/{len(tasks)} runs", file=sys.stderr, flush=True)
    names = {f: Path(f).name.split(".json")[0] for f in files}
    means = {(f, s): np.array(curves[(f, s)])[:, [b - 1 for b in BUDGETS]].mean(0)
             for f in files for s in starts}
    print(f"shipped default ({shipped_variant()}), mean fraction of the optimum at "
          f"B = {', '.join(map(str, BUDGETS))}; {args.seeds} seeds per range")
    print(f"{'file':32} " + "  ".join(f"seeds {s}+".ljust(20) for s in starts))
    for f in files:
        print(f"{names[f]:32} " + "  ".join(
            " ".join(f"{x:.3f}" for x in means[(f, s)]).ljust(20) for s in starts))
    report: dict[str, Any] = {
        "search": shipped_variant(), "budgets": BUDGETS, "seeds": args.seeds,
        "starts": starts, "ranges": {},
        "files": {names[f]: {str(s): {"mean": means[(f, s)].tolist(), "se": _se(curves[(f, s)])}
                             for s in starts} for f in files}}
    reference = starts[0]
    print(f"{'mean over files':32} " + "  ".join(
        " ".join(f"{x:.3f}" for x in np.mean([means[(f, s)] for f in files], 0)).ljust(20)
        for s in starts))
    for s in starts:
        diffs = np.array([means[(f, s)] - means[(f, reference)] for f in files])
        se = diffs.std(0, ddof=1) / np.sqrt(len(files)) if len(files) > 1 else 0 * diffs[0]
        mean = np.mean([means[(f, s)] for f in files], 0)
        report["ranges"][str(s)] = {
            "mean": dict(zip(map(str, BUDGETS), mean.tolist(), strict=True)),
            "minus_reference": dict(zip(map(str, BUDGETS), diffs.mean(0).tolist(), strict=True)),
            "se": dict(zip(map(str, BUDGETS), np.asarray(se).tolist(), strict=True))}
        if s != reference:
            print(f"seeds {s}+ minus seeds {reference}+: " + "  ".join(
                f"B={b} {d:+.3f} ± {e:.3f}" for b, d, e in zip(BUDGETS, diffs.mean(0), se,
                                                               strict=True)))
    if args.peers_from:
        report["verdicts"] = verdicts(load_report(parser, args.peers_from), report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
