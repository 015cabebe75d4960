"""Transfer between GPUs and between spaces, leave one out: does a new GPU start warm from
another GPU's results of the same kernel family, and is it never worse than a cold start?

Every recording is the *target* once; every other recording of its family is a *source*
(another GPU, of the same vendor or not), and so is a **re-gridded** copy of each (``regrid:``:
every other value of each parameter with three or more values dropped and every name respelt,
``block_size_x`` -> ``BlockSizeX``, so the prior reaches the target only through the mapping by
name and nearest value, ``tuner.search.transfer``). Extra recordings (``--extra``, e.g. public
Kernel Tuner caches whose grid differs from the shipped ones) join as targets and sources.

The default search runs on the target cold and warm: the source's results as its prior
(``tuner.search.transfer.measured_prior``) and the source's three best configs first — what a
job on a new GPU kind does. Warm runs are made for each candidate of ``VARIANTS`` (how far the
prior is trusted; ``tuner.search.model_search``); the figures reported for a family are those
of the candidate chosen on the *other* families (leave one family out), by ``score``.

Fraction of the target's optimum after B target measurements (B = 10, 20, 50); a pair
**hurts** where warm < cold - 1 se (se of the difference). ``--seeds`` seeds each. The same
test is also applied to the cold search against itself on other seeds (``cold again``, each
seed + ``AGAIN_OFFSET``): a search no different from cold is flagged in about one cell in six by
chance, and that count, measured in the same run, is the floor the warm start's count is read
against; cells below cold by more than 2 se are counted too.

    python benchmarks/search_transfer.py --seeds 20
    python benchmarks/search_transfer.py --extra ~/hub/*.json.gz   # more targets and sources
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.saved import load_report  # noqa: E402
from benchmarks.search_heldout import family  # noqa: E402
from benchmarks.search_runs import recording  # noqa: E402
from benchmarks.search_runs import simulate  # noqa: E402
from search_spaces.recorded import Recording  # noqa: E402
from tuner.search.transfer import measured_prior  # noqa: E402

BUDGETS = (10, 20, 50)
#: Candidate settings of the prior's trust (``ModelSearch`` keyword arguments).
VARIANTS: dict[str, dict[str, Any]] = {
    "blind": {"prior_trust": False},  # believed whole, no cold twin: the service before
    "trust": {"prior_trust": True},  # the prior weighted by its rank agreement
    "hedged": {"hedged": True, "lead_share": 0.75, "prior_trust": False},
    "hedged60": {"hedged": True, "lead_share": 0.6, "prior_trust": False},
    "hedged60+share": {"hedged": True, "lead_share": 0.6, "share": True, "prior_trust": False},
    "hedged+trust": {"hedged": True, "lead_share": 0.75, "prior_trust": True},  # shipped
    "hedged60+trust": {"hedged": True, "lead_share": 0.6, "prior_trust": True},
    "hedged+trust+fold": {"hedged": True, "lead_share": 0.75, "prior_trust": True,
                          "fold": True},
    "hedged90": {"hedged": True, "lead_share": 0.9, "probe": 3, "prior_trust": False},
    "hedged+trust+probe3": {"hedged": True, "lead_share": 0.75, "prior_trust": True,
                            "probe": 3},
    "hedged+trust+probe4": {"hedged": True, "lead_share": 0.75, "prior_trust": True,
                            "probe": 4},
    "hedged+trust+clear90": {"hedged": True, "lead_share": 0.75, "prior_trust": True,
                             "clear_share": 0.9},
    "hedged+trust+clear90+after4": {"hedged": True, "lead_share": 0.75, "prior_trust": True,
                                    "clear_share": 0.9, "clear_after": 4},
    "hedged+trust+clear90+fold": {"hedged": True, "lead_share": 0.75, "prior_trust": True,
                                  "clear_share": 0.9, "fold": True},
    "hedged+trust+clear90+test100": {"hedged": True, "lead_share": 0.75, "prior_trust": True,
                                     "clear_share": 0.9, "test_ratio": 1.0},
    "hedged+trust+clear90+veto": {"hedged": True, "lead_share": 0.75, "prior_trust": True,
                                  "clear_share": 0.9, "top_veto": "always"},
    "hedged+trust+clear90+vetomap": {"hedged": True, "lead_share": 0.75, "prior_trust": True,
                                     "clear_share": 0.9, "top_veto": "mapped"},
    # the prior's ``unmeasured`` (``tuner.search.transfer.measured_prior``), not a search option
    "hedged+trust+clear90+nopart": {"hedged": True, "lead_share": 0.75, "prior_trust": True,
                                    "clear_share": 0.9, "unmeasured": "no-part"},
}
for _options in VARIANTS.values():  # a candidate that does not name it keeps LEAD_SHARE throughout
    if _options.get("hedged"):
        _options.setdefault("clear_share", None)
#: The service before hedging: a reference, not a candidate (``choose``).
BASELINE = "blind"
#: Run by default: the service before hedging and the shipped default's neighbours.
DEFAULT_CANDIDATES = ("blind", "hedged", "hedged60", "hedged+trust", "hedged60+trust")
#: The cold search once more on other seeds (each seed + AGAIN_OFFSET): how many cells a search
#: no different from cold is flagged in, by chance.
AGAIN = "cold again"
AGAIN_OFFSET = 1000
#: The first seed of every run: the default search's constants were chosen on seeds 0-19 (of
#: other files, but files of one family share a grid, so a seed draws the same random picks on
#: each), and on those seeds the cold search measures about 0.03 above any other seeds at
#: B = 10 and 20; reported figures come from seeds never used to choose anything.
FIRST_SEED = 5000
AMD = re.compile(r"AMD|Radeon|Instinct|MI\d+|W\d{4}")
Result = tuple[dict[str, Any], float | None]


def vendor(path: str) -> str:
    rec = recording(path)
    return "AMD" if AMD.search(rec.device_name or "") or AMD.search(Path(path).name) \
        else "NVIDIA"


def name_of(path: str) -> str:
    return Path(path).name.split(".json")[0]


def source_results(rec: Recording) -> list[Result]:
    """Every config of a recording with its fraction of that recording's optimum (``None``:
    failed) — what the database holds after tuning the kernel on that GPU."""
    best = rec.best_time_ms()
    out = []
    for entry in rec.entries.values():
        config = {k: entry[k] for k in rec.keys}
        t = entry.get("time")
        out.append((config, best / t if isinstance(t, int | float) and t > 0 else None))
    return out


def respelt(name: str) -> str:
    """``block_size_x`` -> ``BlockSizeX``: the same parameter, spelt as another space would."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def regridded(rec: Recording) -> list[Result]:
    """The results of ``rec`` on a coarser grid under other names: for every parameter with
    three or more declared values only every other one is kept (first, third, …)."""
    kept = {k: set(v[::2]) if len(v) >= 3 else set(v) for k, v in rec.grid.items()}
    return [({respelt(k): v for k, v in config.items()}, fraction)
            for config, fraction in source_results(rec)
            if all(config[k] in kept[k] for k in config)]


@lru_cache(maxsize=8)
def results_of(source: str) -> list[Result]:
    if source.startswith("regrid:"):
        return regridded(recording(source[len("regrid:"):]))
    return source_results(recording(source))


def _task(args: tuple[str, str, str, int]) -> tuple[str, str, str, list[float]]:
    target, source, variant, seed = args
    budget = max(BUDGETS)
    if variant in ("cold", AGAIN):
        shift = AGAIN_OFFSET if variant == AGAIN else 0
        return target, source, variant, simulate(target, "default", seed + shift, budget).curve
    results = results_of(source)
    ranked = sorted((r for r in results if r[1] is not None), key=lambda r: -(r[1] or 0.0))
    warm = [config for config, _ in ranked[:3]]
    options = dict(VARIANTS[variant])
    prior = measured_prior(results, options.pop("unmeasured", "nearest"))
    run = simulate(target, "default", seed, budget, prior=prior, warm_start=warm,
                   options=options)
    return target, source, variant, run.curve


def cell(runs: list[list[float]], b: int) -> dict[str, float]:
    at_b = np.array([c[b - 1] for c in runs])
    return {"mean": float(at_b.mean()), "p10": float(np.quantile(at_b, 0.1)),
            "se": float(at_b.std(ddof=1) / np.sqrt(len(at_b))) if len(at_b) > 1 else 0.0}


def hurts(warm: dict[str, float], cold: dict[str, float], ses: float = 1.0) -> bool:
    """Warm below cold by more than ``ses`` standard errors of the difference."""
    return warm["mean"] < cold["mean"] - ses * float(np.hypot(warm["se"], cold["se"]))


def flagged(rows: list[dict[str, Any]], key: str, ses: float = 1.0) -> int:
    """(pair, B) cells where ``key`` (``"held_out"`` or ``AGAIN``) is below cold by > ses se."""
    return sum(hurts(r[key][b], r["cold"][b], ses) for r in rows if key in r
               for b in map(str, BUDGETS))


def score(rows: list[dict[str, Any]], variant: str) -> float:
    """Selection score of a candidate on some pairs: the mean over pairs and budgets of
    warm - cold, minus twice the mean shortfall where warm is below cold (hurting costs more
    than helping earns), minus the worst shortfall (transfer must not hurt *any* pair; the
    first score, without this term, chose the unhedged start for convolution held out, whose
    worst pair then lost 0.50 to a cold start)."""
    gains = np.array([r["warm"][variant][b]["mean"] - r["cold"][b]["mean"] for r in rows
                      for b in map(str, BUDGETS)])
    return float(gains.mean() + 2 * np.minimum(gains, 0.0).mean() + min(gains.min(), 0.0))


def choose(rows: list[dict[str, Any]], variants: list[str]) -> dict[str, str]:
    """Per family, the candidate with the best ``score`` on the other families' pairs (with
    one family only, on its own pairs: not held out).

    ``BASELINE`` (the start before hedging) is reported beside the candidates but chosen only
    when it is the one run: on families where no source misleads it scores best, and chosen
    for convolution on the other three it lost 0.59 to a cold start there (B = 50)."""
    variants = [v for v in variants if v != BASELINE] or variants
    families = sorted({r["family"] for r in rows})
    # One family alone (``--families``): nothing to hold out, chosen on its own pairs.
    return {f: max(variants, key=lambda v: score(
        [r for r in rows if r["family"] != f] or rows, v)) for f in families}


def pair_kind(target: str, source: str) -> str:
    if source.startswith("regrid:"):
        return "regrid"
    return "same vendor" if vendor(target) == vendor(source) else "cross vendor"


def summarise(rows: list[dict[str, Any]], pick: dict[str, str]) -> dict[str, Any]:
    """Means per kind of pair, the pairs where the held-out pick hurts, the worst pair."""
    out: dict[str, Any] = {"held_out_pick": pick, "by_kind": {}, "hurts": [], "worst": {}}
    for r in rows:
        r["held_out"] = r["warm"][pick[r["family"]]]
    for kind in ("same vendor", "cross vendor", "regrid", "all"):
        chosen = [r for r in rows if kind in ("all", r["kind"])]
        if chosen:
            out["by_kind"][kind] = {b: {
                "warm": float(np.mean([r["held_out"][b]["mean"] for r in chosen])),
                "cold": float(np.mean([r["cold"][b]["mean"] for r in chosen])),
                "pairs": len(chosen)} for b in map(str, BUDGETS)}
    for b in map(str, BUDGETS):
        worst = min(rows, key=lambda r: r["held_out"][b]["mean"] - r["cold"][b]["mean"])
        out["worst"][b] = {"target": worst["target"], "source": worst["source"],
                           "warm": worst["held_out"][b]["mean"], "cold": worst["cold"][b]["mean"]}
        out["hurts"] += [{"target": r["target"], "source": r["source"], "B": int(b),
                          "warm": r["held_out"][b]["mean"], "cold": r["cold"][b]["mean"]}
                         for r in rows if hurts(r["held_out"][b], r["cold"][b])]
    if all(AGAIN in r for r in rows):
        out["chance"] = {"again_1se": flagged(rows, AGAIN), "again_2se": flagged(rows, AGAIN, 2),
                         "held_out_2se": flagged(rows, "held_out", 2),
                         "cells": len(rows) * len(BUDGETS)}
    return out


def print_table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    print(f"{'target':>24} {'source':>32} {'kind':>12} " + " ".join(
        f"{'B=' + str(b) + ' cold':>11} {'warm':>11}" for b in BUDGETS))
    for r in rows:
        print(f"{r['target']:>24} {r['source']:>32} {r['kind']:>12} " + " ".join(
            f"{r['cold'][b]['mean']:>11.3f} {r['held_out'][b]['mean']:>10.3f}"
            + ("!" if hurts(r["held_out"][b], r["cold"][b]) else " ")
            for b in map(str, BUDGETS)))
    print("\n(! = warm below cold by more than 1 se)  held-out pick per family:",
          ", ".join(f"{f} {v}" for f, v in summary["held_out_pick"].items()))
    for kind, per_b in summary["by_kind"].items():
        print(f"  {kind:>12} ({per_b['10']['pairs']} pairs): " + "  ".join(
            f"B={b} warm {c['warm']:.3f} cold {c['cold']:.3f}" for b, c in per_b.items()))
    for b, w in summary["worst"].items():
        print(f"  worst pair at B={b}: {w['target']} from {w['source']}: "
              f"warm {w['warm']:.3f} vs cold {w['cold']:.3f}")
    print(f"  pairs x budgets where warm hurts: {len(summary['hurts'])}")
    if "chance" in summary:
        c = summary["chance"]
        print(f"  the same test, cold against cold on other seeds: {c['again_1se']} cells "
              f"(by chance); below cold by > 2 se: warm {c['held_out_2se']}, "
              f"cold again {c['again_2se']}")


def markdown(report: dict[str, Any]) -> str:
    """The README's tables from a saved report: per kind of pair, the mean fraction at each B
    cold, with the service's warm start before hedging (``blind``, when run) and with the
    held-out pick; then every (pair, B) where the held-out pick is below cold by > 1 se."""
    rows, pick = report["pairs"], report["summary"]["held_out_pick"]
    budgets = [str(b) for b in report["budgets"]]
    blind = "blind" in report["candidates"]
    lines = ["| pairs | n | " + " | ".join(
        f"B = {b}: cold / {'before / ' if blind else ''}hedged" for b in budgets) + " |",
        "|---|---|" + "---|" * len(budgets)]
    for kind in ("same vendor", "cross vendor", "regrid", "all"):
        chosen = [r for r in rows if kind in ("all", r["kind"])]
        if not chosen:
            continue

        def mean(key: str, b: str, rs: list[dict[str, Any]] = chosen) -> float:
            values = [(r["cold"] if key == "cold" else r["warm"][pick[r["family"]]]
                       if key == "pick" else r["warm"][key])[b]["mean"] for r in rs]
            return float(np.mean(values))

        lines.append(f"| {kind} | {len(chosen)} | " + " | ".join(
            f"{mean('cold', b):.3f} / " + (f"{mean('blind', b):.3f} / " if blind else "")
            + f"**{mean('pick', b):.3f}**" for b in budgets) + " |")
    kinds = {(r["target"], r["source"]): r["kind"] for r in rows}
    hurts = sorted(report["summary"]["hurts"], key=lambda h: h["warm"] - h["cold"])
    counts = {k: sum(kinds[(h["target"], h["source"])] == k for h in hurts)
              for k in ("same vendor", "cross vendor", "regrid")}
    lines += ["", f"(pair, B) cells where the hedged start is below cold by more than 1 se: "
              f"{len(hurts)} of {len(rows) * len(budgets)} ("
              + ", ".join(f"{k} {n}" for k, n in counts.items()) + ")"
              + _chance_text(report["summary"]) + "; the worst ten:", "",
              "| target | source | kind | B | cold | hedged (held out) |",
              "|---|---|---|---|---|---|"]
    for h in hurts[:10]:
        lines.append(f"| {h['target']} | {h['source']} | {kinds[(h['target'], h['source'])]} "
                     f"| {h['B']} | {h['cold']:.3f} | {h['warm']:.3f} |")
    return "\n".join(lines)


def _chance_text(summary: dict[str, Any]) -> str:
    """What the same test says of the cold search against itself, when it was run."""
    c = summary.get("chance")
    if not c:
        return ""
    return (f". The same test flags the cold search against itself on other seeds in "
            f"{c['again_1se']} of {c['cells']} cells (chance); below cold by more than 2 se: "
            f"hedged {c['held_out_2se']}, cold again {c['again_2se']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=FIRST_SEED,
                        help="seeds FIRST_SEED, FIRST_SEED + 1, …; 0-19 chose the default's "
                        "constants (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--extra", nargs="*", type=Path, default=[],
                        help="more Kernel Tuner cache files (targets and sources)")
    parser.add_argument("--candidates", default=",".join(DEFAULT_CANDIDATES),
                        help=f"trust settings to run (of {', '.join(VARIANTS)})")
    parser.add_argument("--families", default="",
                        help="only these kernel families (comma-separated; default: all)")
    parser.add_argument("--no-regrid", action="store_true", help="no re-gridded sources")
    parser.add_argument("--regrid-only", action="store_true", help="only re-gridded sources")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "search_transfer.json")
    parser.add_argument("--merge", type=Path, metavar="JSON",
                        help="a saved report on the same files and seeds: its figures for the "
                        "candidates this run does not run are kept (selection uses both)")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="print the README's tables from a saved report; run nothing")
    parser.add_argument("--reselect", action="store_true",
                        help="with --render: write the re-run selection back to the report")
    args = parser.parse_args()
    if args.render:  # selection re-run with this file's score, so the tables follow it
        report = load_report(parser, args.render)
        report["summary"] = summarise(report["pairs"], choose(report["pairs"],
                                                               list(report["candidates"])))
        if args.reselect:
            args.render.write_text(json.dumps(report, indent=1) + "\n")
        print(markdown(report))
        return
    variants = [v for v in args.candidates.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        parser.exit(2, f"error: choose candidates among {', '.join(VARIANTS)}\n")
    files = sorted(str(f) for f in (ROOT / "benchmarks" / "data" / "replay").glob("*.json*"))
    files += [str(f) for f in args.extra]
    for f in files:
        try:
            recording(f)
        except (OSError, ValueError) as exc:
            parser.exit(2, f"error: {f}: {exc}\n")
    wanted = {f for f in args.families.split(",") if f}
    pairs = [(t, s) for t in files for s in files
             if s != t and family(name_of(s)) == family(name_of(t))
             and (not wanted or family(name_of(t)) in wanted)]
    if not args.no_regrid:
        regrid = [(t, f"regrid:{s}") for t, s in pairs]
        pairs = regrid if args.regrid_only else pairs + regrid
    targets = sorted({t for t, _ in pairs})
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = [(t, "-", v, seed) for t in targets for v in ("cold", AGAIN) for seed in seeds]
    tasks += [(t, s, v, seed) for t, s in pairs for v in variants for seed in seeds]
    tasks.sort(key=lambda task: task[1])  # one source after another: its results are cached
    curves: dict[tuple[str, str, str], list[list[float]]] = {}
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for done, (target, source, variant, curve) in enumerate(
                pool.imap_unordered(_task, tasks, chunksize=4), start=1):
            curves.setdefault((target, source, variant), []).append(curve)
            if done % 200 == 0 or done == len(tasks):
                print(f"  {done}/{len(tasks)} runs", file=sys.stderr, flush=True)
    rows: list[dict[str, Any]] = []
    for t, s in pairs:
        source = s[len("regrid:"):] if s.startswith("regrid:") else s
        rows.append({
            "target": name_of(t), "source": ("regrid:" if s != source else "") + name_of(source),
            "family": family(name_of(t)), "kind": pair_kind(t, s),
            "cold": {str(b): cell(curves[(t, "-", "cold")], b) for b in BUDGETS},
            AGAIN: {str(b): cell(curves[(t, "-", AGAIN)], b) for b in BUDGETS},
            "warm": {v: {str(b): cell(curves[(t, s, v)], b) for b in BUDGETS}
                     for v in variants}})
    if args.merge:
        kept = load_report(parser, args.merge)["pairs"]
        saved = {(r["target"], r["source"]): r for r in kept}
        for r in rows:
            for v, cells in saved[(r["target"], r["source"])]["warm"].items():
                r["warm"].setdefault(v, cells)
        variants = list(rows[0]["warm"])
    pick = choose(rows, variants)
    summary = summarise(rows, pick)
    print_table(rows, summary)
    print("\nper candidate, on every pair (not held out): score, pairs x budgets hurt:")
    for v in variants:
        hurt = sum(hurts(r["warm"][v][b], r["cold"][b]) for r in rows for b in map(str, BUDGETS))
        print(f"  {v:>16} {score(rows, v):+.4f} {hurt}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "budgets": BUDGETS, "seeds": args.seeds, "first_seed": args.first_seed,
        "candidates": {v: VARIANTS[v] for v in variants},
        "merged": {"from": str(args.merge), "run_now": args.candidates} if args.merge else None,
        "files": [name_of(f) for f in files], "pairs": rows, "summary": summary}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
