"""Held-out choice of the default search's constants, and the verdicts against the peers.

Every candidate (``benchmarks.search_runs.VARIANTS``) runs on every file. For a *fold* (one
file left out, or one kernel family left out) the candidate with the best score on the files
*in* the fold's training set is chosen, and the figures reported for the left-out files are
that candidate's — so no figure is measured on a file that chose it. Score: the mean over the
training files and the budgets of (mean + 10th percentile) / 2 minus the share of the budget
spent on failing configs: it rewards reaching the optimum on most seeds, not leaving any stuck,
and not measuring configs that fail (a failed measurement costs device time; once a search has
found the optimum the fraction at B no longer shows what it wastes).
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping

#: per file -> per search -> per budget (as str) -> {"mean", "p10", "se", ...}
Stats = Mapping[str, Mapping[str, Mapping[str, Mapping[str, float]]]]

VERDICTS = ("ahead", "tie at the optimum", "within 2 se", "behind")


def family(name: str) -> str:
    """A recording's kernel family: ``convolution_A4000`` -> ``convolution``."""
    return name.split("_")[0]


def score(stats: Stats, search: str, files: Iterable[str]) -> float:
    cells = [(cell["mean"] + cell["p10"]) / 2 - cell.get("failed_share", 0.0) for f in files
             for cell in stats[f][search].values()]
    return sum(cells) / len(cells) if cells else float("-inf")


def choose(stats: Stats, candidates: list[str], train: list[str]) -> str:
    """The candidate with the best score on ``train`` (ties: the first listed)."""
    return max(candidates, key=lambda c: score(stats, c, train))


def folds(files: list[str], by: str) -> dict[str, list[str]]:
    """Left-out file(s) per fold: ``by="file"`` one each, ``by="family"`` a family each."""
    if by == "file":
        return {f: [f] for f in files}
    out: dict[str, list[str]] = {}
    for f in files:
        out.setdefault(family(f), []).append(f)
    return out


def held_out(stats: Stats, candidates: list[str], by: str) -> dict[str, str]:
    """Per file, the candidate chosen without it (its fold's pick)."""
    files = sorted(stats)
    pick: dict[str, str] = {}
    for left_out in folds(files, by).values():
        chosen = choose(stats, candidates, [f for f in files if f not in left_out])
        pick.update({f: chosen for f in left_out})
    return pick


def verdict(ours: Mapping[str, float], peer: Mapping[str, float]) -> tuple[float, float, str]:
    """Our lead over the peer's mean, two standard errors of that difference, and the verdict:
    a lead counts only beyond two standard errors; both at the optimum on every seed is a tie
    with nothing left to win."""
    lead = ours["mean"] - peer["mean"]
    two_se = 2 * (ours["se"] ** 2 + peer["se"] ** 2) ** 0.5
    if ours["mean"] >= 1.0 and peer["mean"] >= 1.0:
        return lead, two_se, "tie at the optimum"
    if lead > two_se:
        return lead, two_se, "ahead"
    if lead >= -two_se:
        return lead, two_se, "within 2 se"
    return lead, two_se, "behind"


def best_peer(stats_of_file: Mapping[str, Mapping[str, Mapping[str, float]]],
              peers: list[str], budget: str) -> str:
    """The peer with the highest mean at ``budget`` on one file."""
    return max((p for p in peers if p in stats_of_file),
               key=lambda p: stats_of_file[p][budget]["mean"])
