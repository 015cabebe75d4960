"""A transferred prior that cannot cost much: the warm search hedged by a cold one.

A prior from another GPU or another space (``tuner.search.transfer``) is right where the two
are alike and misleading where they are not, and a search cannot tell which before it has
measured. ``HedgedSearch`` runs two default searches on the same problem: the **warm** one
(the prior and the transferred configs, and every result of both) and the **cold** one (no
prior, only its own results, so a misleading prior's region cannot capture it). Each proposal
goes to one of them: the first to the warm search; then, until both have measured
``PROBE`` configs, alternately; from then on ``LEAD_SHARE`` of the proposals to the search whose
own best measured config is better, the rest to the other (a prior that proves worse than a
cold start gets ever fewer measurements; one that finds the optimum loses nothing to the
cold search's share) — ``CLEAR_SHARE`` instead while the other's best is below
``CLEAR_RATIO`` of the leader's (a clear lead) and the other has made at least ``CLEAR_AFTER``
proposals (``clear_after``). A config one of them proposes that the other already measured is
told its result at once and never measured twice.

The warm search weights its prior by the prior's rank agreement with what has been measured
(``ModelSearch(prior_trust=True)``, ``PRIOR_TRUST``), so a prior that proves misleading steers
its proposals less while the split of the budget still follows the two searches' bests.

``fold=True`` (a candidate of ``benchmarks/search_transfer.py``): once the prior's rank
agreement with the measurements is known and not positive, the warm search's prior weighs
nothing (``prior_trust``), so it is a cold search that knows every measurement — better than
the cold twin, which knows only its own — and it makes every proposal until the agreement
turns positive again.

``test_ratio`` (``TEST_RATIO``): a prior must earn its place. Once both searches have had
their probes' results, a warm best below ``test_ratio`` of the cold best (the prior's own
picks did no better than a cold start's first configs) drops the prior for good
(``ModelSearch.drop_prior``) and the warm search, now a cold search that knows every
measurement, makes every proposal.

``share=True`` (a candidate of ``benchmarks/search_transfer.py``, not the default) tells the
cold search the warm one's results too: fewer pairs where transfer hurts, but a misleading
prior's region then captures the cold search as well (a worse worst pair).

``trust()`` is the share of the proposals the warm search made while it had its prior;
``prior_dropped()`` whether the test dropped it; ``agreement()`` the rank
agreement between the prior and what was measured (``ModelSearch.agreement``) — what
``tuner status`` shows.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

from search_spaces import Config
from search_spaces import Context
from search_spaces import SearchSpace
from search_spaces import canonical_json
from tuner.search.model_search import ModelSearch
from tuner.search.proposer import Asked
from tuner.search.proposer import Told

#: Proposals each search makes, alternately, before the better one leads.
PROBE = 2
#: Share of the proposals the leading search makes (chosen held out among 0.6 and 0.75 in
#: ``benchmarks/search_transfer.py``).
LEAD_SHARE = 0.75
#: Share of the proposals the leader makes while the other's best is below CLEAR_RATIO of its
#: best (``None``: LEAD_SHARE throughout; chosen held out in ``benchmarks/search_transfer.py``).
CLEAR_SHARE: float | None = 0.9
CLEAR_RATIO = 0.5
#: Proposals the trailing search must have made before a lead counts as clear (``clear_after``).
CLEAR_AFTER = 0
#: The warm search weights its prior by its rank agreement (chosen held out on three of the four
#: families and on all pairs in ``benchmarks/search_transfer.py``, candidate ``hedged+trust``).
PRIOR_TRUST = True
#: Once both searches have had their probes' results, a prior whose search's best is below
#: TEST_RATIO of the cold one's is dropped for good, and the warm search, a cold one that knows
#: every measurement, makes every proposal (``test_ratio``; 0: never; 1.0 is the candidate
#: ``hedged+trust+clear90+test100`` of ``benchmarks/search_transfer.py``, held out the pick for
#: two families of four).
TEST_RATIO = 0.0
#: A warm search whose prior disagrees with the measurements makes every proposal (``fold``).
FOLD = False
#: Known configs one search may propose in a row before the wrapper gives up on it this ask.
MAX_KNOWN_IN_A_ROW = 50


class HedgedSearch:
    """A warm ``ModelSearch`` and a cold one sharing a budget (module docstring)."""

    def __init__(self, space: SearchSpace, ctx: Context, seed: int | None,
                 prior: Callable[[Config], float] | None, warm_start: Sequence[Config],
                 lead_share: float = LEAD_SHARE, probe: int = PROBE, share: bool = False,
                 prior_trust: bool = PRIOR_TRUST, fold: bool = FOLD,
                 clear_share: float | None = CLEAR_SHARE, clear_after: int = CLEAR_AFTER,
                 test_ratio: float = TEST_RATIO, **options: Any) -> None:
        self.lead_share, self.probe, self.share = lead_share, probe, share
        self.clear_share, self.clear_after, self.test_ratio = clear_share, clear_after, test_ratio
        self._failed_test = False  # the prior failed the test (``test_ratio``): dropped
        self._without_prior = 0  # proposals the warm search made after its prior was dropped
        self.fold = fold and prior_trust
        self.warm = ModelSearch(space, ctx, seed, prior=prior, warm_start=warm_start,
                                prior_trust=prior_trust, **options)
        cold_seed = None if seed is None else seed + 7919
        self.cold = ModelSearch(space, ctx, cold_seed, **options)
        self.cold.adopt_candidates(self.warm)  # the valid configs are enumerated once
        self._arm: dict[int, tuple[str, int, Config]] = {}  # number -> (arm, its number, config)
        self._results: dict[str, float | None] = {}  # config key -> measured fraction
        self._best = {"warm": float("-inf"), "cold": float("-inf")}
        self._made = {"warm": 0, "cold": 0}
        self._told = {"warm": 0, "cold": 0}  # results each search has had (``test_ratio``)
        self._next_number = 0

    def _search(self, arm: str) -> ModelSearch:
        return self.warm if arm == "warm" else self.cold

    def _choose(self) -> str:
        made = self._made
        total = made["warm"] + made["cold"]
        if total == 0:
            return "warm"
        if min(made.values()) < self.probe:
            return "warm" if made["warm"] <= made["cold"] else "cold"
        if self.test_ratio and not self._failed_test and min(self._told.values()) >= self.probe \
                and self._best["warm"] < self.test_ratio * self._best["cold"]:
            self._failed_test = True
            self.warm.drop_prior()
        if self._failed_test:
            return "warm"
        agreement = self.warm.agreement() if self.fold else None
        if agreement is not None and agreement <= 0.0:
            return "warm"  # its prior weighs nothing: a cold search with every measurement
        lead = "warm" if self._best["warm"] >= self._best["cold"] else "cold"
        other = "cold" if lead == "warm" else "warm"
        share = self.lead_share
        if self.clear_share is not None and made[other] >= self.clear_after and \
                self._best[other] < CLEAR_RATIO * self._best[lead]:
            share = self.clear_share
        return lead if made[lead] < share * (total + 1) else other

    # -- the proposer protocol ----------------------------------------------------------------
    def rebuild(self, history: Sequence[Told]) -> None:
        """After a restart: the warm search gets every trial (numbers kept); the split between
        the two starts again from their counts (each past trial counts as the warm one's)."""
        self.warm.rebuild(list(history))
        for t in history:
            self._next_number = max(self._next_number, t.number + 1)
            self._arm[t.number] = ("warm", t.number, dict(t.config))
            self._made["warm"] += 1
            if t.final:
                self._record("warm", t.config, t.fraction)

    def ask(self) -> Asked | None:
        first = self._choose()
        for arm in (first, "cold" if first == "warm" else "warm"):
            search = self._search(arm)
            for _ in range(MAX_KNOWN_IN_A_ROW):
                asked = search.ask()
                if asked is None:
                    break
                key = canonical_json(asked.config)
                if key in self._results:  # measured by the other one: told, not re-measured
                    search.tell(asked.number, self._results[key])
                    continue
                number = self._next_number
                self._next_number += 1
                self._arm[number] = (arm, asked.number, asked.config)
                self._made[arm] += 1
                self._without_prior += arm == "warm" and self._failed_test
                return Asked(number=number, config=asked.config)
        return None

    def tell(self, number: int, fraction: float | None) -> None:
        entry = self._arm.pop(number, None)
        if entry is None:
            return
        arm, own, config = entry
        self._search(arm).tell(own, fraction)
        self._record(arm, config, fraction)
        if arm == "cold":  # the warm search learns from every measurement
            self.warm.observe(config, fraction)
        elif self.share:
            self.cold.observe(config, fraction)

    def _record(self, arm: str, config: Config, fraction: float | None) -> None:
        self._results[canonical_json(config)] = fraction
        self._told[arm] += 1
        if fraction is not None:
            self._best[arm] = max(self._best[arm], fraction)

    # -- what status shows --------------------------------------------------------------------
    def trust(self) -> float:
        """Share of the proposals so far that the warm search made while it had its prior
        (1.0 before any)."""
        total = self._made["warm"] + self._made["cold"]
        return (self._made["warm"] - self._without_prior) / total if total else 1.0

    def prior_dropped(self) -> bool:
        """Whether the prior failed its test against the cold probes (``test_ratio``)."""
        return self._failed_test

    def agreement(self) -> float | None:
        return self.warm.agreement()
