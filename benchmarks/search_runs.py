"""One simulated search run on a recorded space (``benchmarks/data/replay/README.md``).

Budget B = distinct recorded configs measured, succeeded or failed; proposals of configs the
recording lacks (statically invalid) and repeats are free. A run gives up after ``MAX_FREE``
free proposals in all, or ``MAX_FREE_IN_A_ROW`` in a row (the search is repeating itself; its
best so far then holds for the rest of the budget).

Search names: ``default`` (the service's ``auto``), ``v:<variant>`` (the default search with
the constants of ``VARIANTS[variant]``, for held-out selection), ``tpe`` / ``gp`` (Optuna's
``TPESampler`` / ``GPSampler``, default settings) and ``kt:<strategy>`` (Kernel Tuner,
``benchmarks/search_peers.py``).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from functools import lru_cache
from typing import Any

from search_spaces import Config
from search_spaces import Context
from search_spaces.recorded import Recording
from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tuner.control.searches import make_proposer
from tuner.search.hedged import HedgedSearch
from tuner.search.model_search import ModelSearch
from tuner.search.proposer import Proposer

MAX_FREE = 2_000
MAX_FREE_IN_A_ROW = 200
#: Observations from which a proposal counts as "late" (the issue's 200-observation cost).
LATE_FROM = 150

#: Candidate constants of the default search. Held-out selection (``search_heldout.py``)
#: picks one per fold on the other files; ``tuner.search.model_search.ModelSearch``'s defaults
#: are the pick on all files.
#: The constants every candidate since ``feas+fails`` shares.
_FEAS_FAILS: dict[str, Any] = {"feasibility": True, "failed_in_model": True, "explore_after": 0}
VARIANTS: dict[str, dict[str, Any]] = {
    "base": {"feasibility": False, "failed_in_model": True, "explore_after": 0},
    "feas": {"feasibility": True, "failed_in_model": False, "explore_after": 0},
    "explore": {"feasibility": False, "failed_in_model": True, "explore_after": 20},
    "feas+explore": {"feasibility": True, "failed_in_model": False, "explore_after": 20},
    "feas+explore40": {"feasibility": True, "failed_in_model": False, "explore_after": 40},
    "feas+fails": {**_FEAS_FAILS},
    "feas+fails+diverse": {**_FEAS_FAILS, "diverse_tops": "stalled"},
    "feas+fails+diverse-always": {**_FEAS_FAILS, "diverse_tops": "always"},
    "feas+fails+diverse-mixed": {**_FEAS_FAILS, "diverse_tops": "mixed"},
    "feas+fails+diverse-always+pow2": {**_FEAS_FAILS, "diverse_tops": "always",
                                       "pow2_features": "everywhere"},
    "feas+fails+diverse-always+pow2model": {**_FEAS_FAILS, "diverse_tops": "always",
                                            "pow2_features": "model"},
    "feas+fails+diverse-mixed+pow2model": {**_FEAS_FAILS, "diverse_tops": "mixed",
                                           "pow2_features": "model"},
    "feas+fails+diverse-mixed+pow2auto": {**_FEAS_FAILS, "diverse_tops": "mixed",
                                          "pow2_features": "auto"},
    "feas+fails+diverse-mixed+pow2auto+snap": {**_FEAS_FAILS, "diverse_tops": "mixed",
                                               "pow2_features": "auto", "init": "alternate-snap"},
    "feas+fails+diverse-mixed+pow2auto+snap+alt10": {**_FEAS_FAILS, "diverse_tops": "mixed",
                                                     "pow2_features": "auto",
                                                     "init": "alternate-snap",
                                                     "alternatives_after": 10},
    "feas+fails+diverse-mixed+pow2auto+snap+alt10+global-only+sweep": {
        **_FEAS_FAILS, "diverse_tops": "mixed", "pow2_features": "auto",
        "init": "alternate-snap", "alternatives_after": 10, "alternatives": "elsewhere"},
    "feas+fails+diverse-mixed+pow2auto+snap+alt10+global-only+sweep+climb": {
        **_FEAS_FAILS, "diverse_tops": "mixed", "pow2_features": "auto",
        "init": "alternate-snap", "alternatives_after": 10, "alternatives": "climb"},
    "feas+fails+diverse-mixed+pow2auto+snap+alt10+global-only+sweep+climb2": {
        **_FEAS_FAILS, "diverse_tops": "mixed", "pow2_features": "auto",
        "init": "alternate-snap", "alternatives_after": 10, "alternatives": "climb",
        "climb_patience": 2},
    "feas+fails+diverse-mixed+pow2auto+snap+alt10+global-only+sweep+climb1": {
        **_FEAS_FAILS, "diverse_tops": "mixed", "pow2_features": "auto",
        "init": "alternate-snap", "alternatives_after": 10, "alternatives": "climb",
        "climb_patience": 1},
    "feas+fails+diverse-mixed+pow2auto+snap+alt10+global-only+sweep+climb8": {
        **_FEAS_FAILS, "diverse_tops": "mixed", "pow2_features": "auto",
        "init": "alternate-snap", "alternatives_after": 10, "alternatives": "climb",
        "climb_patience": 8},
}
for _consts in VARIANTS.values():  # measured before diverse_tops existed: the three best
    _consts.setdefault("diverse_tops", "never")
    _consts.setdefault("pow2_features", "off")  # measured before the power-of-two feature
    _consts.setdefault("init", "alternate")  # measured before the snapped picks (``S``)
    _consts.setdefault("alternatives_after", 0)  # measured before the stalled alternatives
    _consts.setdefault("alternatives", "local")  # measured before looking elsewhere
    _consts.setdefault("climb_patience", 4)  # no part unless alternatives="climb"


#: The constants a candidate names (``ModelSearch`` keyword arguments).
CONSTANTS = tuple(next(iter(VARIANTS.values())))


def shipped_variant() -> str:
    """The candidate whose constants are ``ModelSearch``'s defaults (what ``auto`` runs)."""
    params = inspect.signature(ModelSearch.__init__).parameters
    shipped = {k: params[k].default for k in CONSTANTS}
    return next(name for name, consts in VARIANTS.items() if consts == shipped)


@dataclass
class Run:
    """One run: best fraction after each measured config, failures among the first b measured
    (same length), CPU ms per proposal (``ms``) and those made with >= LATE_FROM observations."""

    curve: list[float]
    failed: list[int]
    ms: list[float] = field(default_factory=list)
    late_ms: list[float] = field(default_factory=list)


@lru_cache(maxsize=4)
def recording(path: str) -> Recording:
    return load_recording(path)


def build(search: str, rec: Recording, seed: int,
          prior: Callable[[Config], float] | None = None,
          warm_start: Sequence[Config] = (),
          options: Mapping[str, Any] | None = None) -> Proposer:
    """The named search on a recording; ``options``: ``ModelSearch`` keyword arguments for
    the default search (its trust settings, say), over the variant's constants."""
    space = recorded_space(rec)
    ctx = Context(rec.problem(), "fp32")
    if search.startswith("v:") or options is not None:
        constants = VARIANTS[search[2:]] if search.startswith("v:") else {}
        options = dict(options or {})
        if options.pop("hedged", False):
            return HedgedSearch(space, ctx, seed, prior, warm_start, **{**constants, **options})
        return ModelSearch(space, ctx, seed, prior=prior, warm_start=warm_start,
                           **{**constants, **(options or {})})
    name = "auto" if search == "default" else search
    return make_proposer(name, space, ctx, seed, prior=prior, warm_start=warm_start)


def simulate(path: str, search: str, seed: int, budget: int,
             prior: Callable[[Config], float] | None = None,
             warm_start: Sequence[Config] = (),
             options: Mapping[str, Any] | None = None) -> Run:
    """Run ``search`` on the recording at ``path`` until ``budget`` configs are measured."""
    rec = recording(path)
    if search.startswith("kt:"):
        from benchmarks.search_peers import kt_run

        curve, failed, ms = kt_run(path, rec, search[3:], seed, budget)
        return Run(curve, failed, ms, [])
    space = recorded_space(rec)
    proposer = build(search, rec, seed, prior, warm_start, options)
    best_ms = rec.best_time_ms()
    measured: dict[str, float | None] = {}
    run = Run([], [])
    best, failures, free, in_a_row = 0.0, 0, 0, 0
    while len(measured) < budget and free < MAX_FREE and in_a_row < MAX_FREE_IN_A_ROW:
        start = time.process_time()
        asked = proposer.ask()
        took = 1000 * (time.process_time() - start)
        run.ms.append(took)
        if len(measured) >= LATE_FROM:
            run.late_ms.append(took)
        if asked is None:
            break
        config = asked.config
        key = rec.key_of(config) if not space.domain_errors(config) else None
        if key is None or key not in rec.entries or key in measured:
            # statically invalid, or a repeat: free
            proposer.tell(asked.number, measured.get(key) if key else None)
            free, in_a_row = free + 1, in_a_row + 1
            continue
        in_a_row = 0
        value = rec.entries[key]["time"]
        fraction = best_ms / value if isinstance(value, int | float) and value > 0 else None
        measured[key] = fraction
        proposer.tell(asked.number, fraction)
        failures += fraction is None
        best = max(best, fraction or 0.0)
        run.curve.append(best)
        run.failed.append(failures)
    pad = budget - len(run.curve)
    run.curve += [best] * pad
    run.failed += [failures] * pad
    return run
