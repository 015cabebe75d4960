"""Transfer that cannot cost much: configs mapped between spaces that differ by name and
grid, the prior's rank agreement, and the hedged search that gives a misleading prior ever
fewer measurements (``tuner.search.transfer``, ``tuner.search.hedged``)."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from search_spaces import Choice
from search_spaces import Context
from search_spaces import SearchSpace
from search_spaces import canonical_json
from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tests.conftest import ROOT
from tests.conftest import replay_file
from tuner.control.priors import Start
from tuner.control.searches import make_proposer
from tuner.search.gp import rank_agreement
from tuner.search.hedged import HedgedSearch
from tuner.search.model_search import ModelSearch
from tuner.search.proposer import Told
from tuner.search.transfer import MeasuredPrior
from tuner.search.transfer import map_config
from tuner.search.transfer import match_names
from tuner.search.transfer import measured_prior
from tuner.search.transfer import nearest_value
from tuner.views.jobs import prior_text


def test_names_match_by_spelling_then_by_similarity_one_to_one():
    assert match_names(["BlockSizeX", "TILE_Y", "unrelated_flag"],
                       ["block_size_x", "tile_size_y", "num_warps"]) == {
        "BlockSizeX": "block_size_x", "TILE_Y": "tile_size_y"}
    assert match_names(["a"], []) == {}


def test_nearest_value_is_by_ratio_for_positive_numbers_and_exact_otherwise():
    assert nearest_value(48, [16, 32, 128]) == 32  # 48/32 < 128/48
    assert nearest_value(100, [16, 32, 128]) == 128
    assert nearest_value(0, [0, 4]) == 0
    assert nearest_value("row", ["row", "col"]) == "row"
    assert nearest_value("diag", ["row", "col"]) is None
    assert nearest_value(3, ["row"]) is None


def test_a_config_of_another_space_maps_to_the_nearest_declared_values():
    space = SearchSpace("t", (Choice("BLOCK_M", (16, 32, 64, 128)), Choice("num_warps", (4, 8))))
    assert map_config({"block_m": 100, "NumWarps": 2, "extra": 1}, space) == {
        "BLOCK_M": 128, "num_warps": 4}
    assert map_config({"block_m": 100}, space) is None  # num_warps gets no value


def test_a_prior_from_a_regridded_renamed_space_keeps_its_order():
    source = [({"BlockM": bm, "Flag": f}, fraction) for bm, f, fraction in [
        (16, 0, 0.2), (64, 0, 0.9), (64, 1, 0.5), (256, 0, 0.4), (256, 1, None)]]
    prior = measured_prior(source)
    assert prior is not None
    # The target space lacks Flag (its best counts) and has values the source never measured.
    assert prior({"block_m": 64}) == 0.0
    assert prior({"block_m": 40}) == 0.0  # nearest measured: 64
    assert prior({"block_m": 16}) == pytest.approx(math.log(0.2 / 0.9))
    assert prior({"block_m": 512}) == pytest.approx(math.log(0.4 / 0.9))
    assert prior({"block_m": 512, "Flag": 1}) == -math.inf  # a failure there


def test_a_value_the_source_never_measured_can_play_no_part_in_the_prior():
    """``unmeasured="no-part"``: block_m 512 (the source measured 16, 64 and 256) does not
    take the figure of its nearest measured value 256; block_m drops out for it and the best
    over block_m given the rest counts — 0.9 with flag 0, 0.5 with flag 1. A measured value
    is as before."""
    source = [({"BlockM": bm, "Flag": f}, fraction) for bm, f, fraction in [
        (16, 0, 0.2), (64, 0, 0.9), (64, 1, 0.5), (256, 0, 0.4), (256, 1, None)]]
    nearest = measured_prior(source)
    no_part = measured_prior(source, unmeasured="no-part")
    assert nearest is not None and no_part is not None
    assert nearest({"block_m": 512, "flag": 0}) == pytest.approx(math.log(0.4 / 0.9))
    assert no_part({"block_m": 512, "flag": 0}) == 0.0
    assert no_part({"block_m": 512, "flag": 1}) == pytest.approx(math.log(0.5 / 0.9))
    assert no_part({"block_m": 16, "flag": 0}) == nearest({"block_m": 16, "flag": 0})
    with pytest.raises(ValueError, match="unmeasured"):
        measured_prior(source, unmeasured="guess")


def test_rank_agreement_is_spearmans_correlation():
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert rank_agreement(a, a ** 3) == pytest.approx(1.0)
    assert rank_agreement(a, -a) == pytest.approx(-1.0)
    assert rank_agreement(a, np.ones(4)) == 0.0


def _run(search, rec, budget):
    """Measure ``budget`` distinct configs of a recording; the best fraction found."""
    seen: set[str] = set()
    best = 0.0
    while len(seen) < budget:
        asked = search.ask()
        assert asked is not None
        key = canonical_json(asked.config)
        assert key not in seen  # never measured twice, whichever twin proposed it
        seen.add(key)
        entry = rec.entries[rec.key_of(asked.config)]
        fraction = None if isinstance(entry["time"], str) else rec.best_time_ms() / entry["time"]
        search.tell(asked.number, fraction)
        best = max(best, fraction or 0.0)
    return best


def _exact_prior(rec, sign=1.0):
    """The log fractions of ``rec`` themselves (failures lowest) as a prior; ``sign=-1``: the
    same, backwards (worst first)."""
    best = rec.best_time_ms()
    values = {rec.key_of(e): math.log(best / e["time"]) if not isinstance(e["time"], str)
              else -20.0 for e in rec.entries.values()}
    return lambda config: sign * values[rec.key_of(config)]


def _inverted_prior(rec):
    return _exact_prior(rec, -1.0)


def test_a_misleading_prior_loses_the_lead_and_a_right_one_keeps_it():
    """After the probes the cold twin leads against an inverted prior (later the warm twin,
    its prior then weighted 0, may win the lead back on its measurements alone)."""
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space, ctx = recorded_space(rec), Context(rec.problem(), "fp32")
    wrong = HedgedSearch(space, ctx, 1, _inverted_prior(rec), [])
    _run(wrong, rec, 10)
    assert wrong.trust() <= 0.3 and wrong.agreement() is not None and wrong.agreement() < 0
    right = HedgedSearch(space, ctx, 1, _exact_prior(rec), [])
    assert _run(right, rec, 20) == 1.0 and right.trust() >= 0.6
    assert right.agreement() > 0.5


def _order(search, warm_fraction, cold_fraction, proposals):
    """The twin ("w"/"c") of each of the first ``proposals`` proposals when every warm result
    is ``warm_fraction`` and every cold one ``cold_fraction``."""
    arms = ""
    for _ in range(proposals):
        asked = search.ask()
        arm = search._arm[asked.number][0]
        arms += arm[0]
        search.tell(asked.number, warm_fraction if arm == "warm" else cold_fraction)
    return arms


def _split(search, warm_fraction, cold_fraction, proposals):
    """Proposals each twin made (``_order``)."""
    arms = _order(search, warm_fraction, cold_fraction, proposals)
    return {"warm": arms.count("w"), "cold": arms.count("c")}


def test_a_clear_lead_takes_the_clear_share_and_a_narrow_one_the_lead_share():
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space, ctx = recorded_space(rec), Context(rec.problem(), "fp32")
    prior = _exact_prior(rec)
    clear = _split(HedgedSearch(space, ctx, 1, prior, [], clear_share=0.9), 0.9, 0.2, 30)
    assert clear["cold"] <= 2 + 0.1 * 30  # the two probes, then a tenth
    narrow = _split(HedgedSearch(space, ctx, 1, prior, [], clear_share=0.9), 0.9, 0.6, 30)
    assert 0.2 * 30 <= narrow["cold"] <= 2 + 0.25 * 30
    off = _split(HedgedSearch(space, ctx, 1, prior, [], clear_share=None), 0.9, 0.2, 30)
    assert off == narrow


def test_a_lead_is_clear_only_once_the_trailing_twin_made_clear_after_proposals():
    """Two probes each, then the lead share (3 of 4) until the cold twin has made four
    proposals; only then the clear share (9 of 10)."""
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space, ctx = recorded_space(rec), Context(rec.problem(), "fp32")
    prior = _exact_prior(rec)
    early = _order(HedgedSearch(space, ctx, 1, prior, [], clear_share=0.9), 0.9, 0.2, 30)
    late = _order(HedgedSearch(space, ctx, 1, prior, [], clear_share=0.9, clear_after=4),
                  0.9, 0.2, 30)
    assert early.count("c") == 3 and early.startswith("wcwc")
    assert late.startswith("wcwc") and late.count("c") > early.count("c")
    fourth = [i for i, arm in enumerate(late) if arm == "c"][3]
    assert "c" not in late[fourth + 1:fourth + 9]  # clear from the fourth on


def test_a_prior_whose_picks_do_no_better_than_the_cold_probes_is_dropped_for_good():
    """``test_ratio=1``: after two probes' results each (not before the warm ones are in), a warm
    best below the cold one drops the prior
    (the warm twin then weighs nothing of it and proposes everything, even once it leads
    again); a warm best at or above it keeps the usual split."""
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space, ctx = recorded_space(rec), Context(rec.problem(), "fp32")
    failed = HedgedSearch(space, ctx, 1, _exact_prior(rec), [], clear_share=0.9, test_ratio=1.0)
    arms = _order(failed, 0.3, 0.5, 20)
    assert arms == "wcwc" + "w" * 16 and failed.warm.prior is None
    assert not failed.warm._prior.any()  # the prior weighs nothing in its model
    assert _order(failed, 0.9, 0.5, 10) == "w" * 10 and failed.prior_dropped()
    assert failed.trust() == 2 / 30  # only the two probes followed the prior
    passed = HedgedSearch(space, ctx, 1, _exact_prior(rec), [], clear_share=0.9, test_ratio=1.0)
    assert _order(passed, 0.5, 0.5, 20).count("c") > 2 and not passed.prior_dropped()
    off = HedgedSearch(space, ctx, 1, _exact_prior(rec), [], clear_share=0.9)
    assert _order(off, 0.3, 0.5, 20).count("w") < 16  # without the test the cold twin leads
    pending = HedgedSearch(space, ctx, 1, _exact_prior(rec), [], clear_share=0.9,
                           test_ratio=1.0)
    asked = [pending.ask() for _ in range(4)]  # two probes each, all in flight at once
    cold = [a for a in asked if pending._arm[a.number][0] == "cold"]
    for a in cold:
        pending.tell(a.number, 0.5)
    pending.ask()  # the warm probes' results not in yet: no test
    assert not pending.prior_dropped()
    start = Start(prior=_exact_prior(rec), source="3 results on other device kinds")
    shown = start.report(failed)
    assert shown is not None and shown["dropped"] and shown["trust"] == round(2 / 30, 4)
    assert prior_text(shown).endswith("dropped: its picks measured below a cold start's "
                                      "first configs")
    assert start.report(passed)["dropped"] is False


def test_the_services_warm_twin_believes_its_prior_only_as_far_as_it_agrees():
    """The default hedge weights the warm twin's prior by its rank agreement: an inverted prior
    is weighted 0 once measured, an exact one fully; ``prior_trust=False`` believes it whole."""
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space, ctx = recorded_space(rec), Context(rec.problem(), "fp32")
    search = make_proposer("auto", space, ctx, 1, prior=_inverted_prior(rec))
    assert isinstance(search, HedgedSearch) and search.warm.prior_trust
    _run(search, rec, 20)
    assert search.warm.trust() == 0.0
    right = HedgedSearch(space, ctx, 1, _exact_prior(rec), [])
    _run(right, rec, 20)
    assert right.warm.trust() > 0.5
    whole = HedgedSearch(space, ctx, 1, _inverted_prior(rec), [], prior_trust=False)
    _run(whole, rec, 20)
    assert whole.warm.trust() == 1.0


def test_a_folding_hedge_gives_every_proposal_to_a_warm_twin_whose_prior_disagrees():
    """``fold=True``: once the inverted prior's agreement is known and not positive, the warm
    twin (its prior weighted 0) proposes everything; with an exact prior the split is the
    usual one, led by the warm twin but never all of it."""
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space, ctx = recorded_space(rec), Context(rec.problem(), "fp32")
    wrong = HedgedSearch(space, ctx, 1, _inverted_prior(rec), [], fold=True)
    _run(wrong, rec, 8)
    assert wrong.agreement() is not None and wrong.agreement() <= 0
    made_cold = wrong._made["cold"]
    _run(wrong, rec, 12)  # twelve more, while the agreement stays below zero
    assert wrong.agreement() <= 0 and wrong._made["cold"] == made_cold
    plain = HedgedSearch(space, ctx, 1, _inverted_prior(rec), [])
    _run(plain, rec, 20)
    assert plain._made["cold"] > made_cold  # without fold the cold twin keeps its share
    right = HedgedSearch(space, ctx, 1, _exact_prior(rec), [], fold=True)
    _run(right, rec, 20)
    assert right.agreement() > 0 and 0 < right._made["cold"] < right._made["warm"]


def test_only_a_sharing_hedge_tells_the_cold_twin_the_warm_ones_results():
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space, ctx = recorded_space(rec), Context(rec.problem(), "fp32")
    for share in (False, True):
        search = HedgedSearch(space, ctx, 1, _exact_prior(rec), [], share=share)
        _run(search, rec, 12)
        cold_known = {canonical_json(search.cold._candidates[i]) for i in search.cold.observed}
        warm_known = {canonical_json(search.warm._candidates[i]) for i in search.warm.observed}
        assert len(warm_known) == 12  # the warm twin learns from every measurement either way
        assert (len(cold_known) == 12) is share, (share, len(cold_known))


def test_a_hedged_search_resumes_from_its_history():
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space, ctx = recorded_space(rec), Context(rec.problem(), "fp32")
    search = HedgedSearch(space, ctx, 2, _inverted_prior(rec), [])
    history = []
    for _ in range(6):
        asked = search.ask()
        entry = rec.entries[rec.key_of(asked.config)]
        fraction = None if isinstance(entry["time"], str) else rec.best_time_ms() / entry["time"]
        search.tell(asked.number, fraction)
        history.append(Told(asked.number, asked.config, True, fraction))
    resumed = HedgedSearch(space, ctx, 2, _inverted_prior(rec), [])
    resumed.rebuild(history)
    nxt = resumed.ask()
    assert nxt.number == 6
    assert canonical_json(nxt.config) not in {canonical_json(t.config) for t in history}


def test_the_veto_distrusts_a_prior_right_about_poor_configs_and_wrong_about_good_ones():
    """``top_veto``: ten configs measured 0.1 … 1.0; the prior orders the poorer five rightly
    and puts the better five above them but backwards. Its agreement over all ten is positive,
    over the better half -1: trusted as far as it agrees without the veto, not at all with it.
    The veto waits for 2 × TRUST_POINTS successes, and an exact prior passes it."""
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space, ctx = recorded_space(rec), Context(rec.problem(), "fp32")
    configs = ModelSearch(space, ctx, 0)._ensure()[:10]
    fractions = [0.1 * (i + 1) for i in range(10)]
    for order, veto, trusted in (([1, 2, 3, 4, 5, 10, 9, 8, 7, 6], "never", "agreement"),
                                 ([1, 2, 3, 4, 5, 10, 9, 8, 7, 6], "always", 0.0),
                                 ([1, 2, 3, 4, 5, 10, 9, 8, 7, 6], "mapped", "agreement"),
                                 (list(range(1, 11)), "always", 1.0)):
        by_key = {canonical_json(c): float(r) for c, r in zip(configs, order, strict=True)}

        def prior(config, by_key=by_key):
            return by_key.get(canonical_json(config), 0.0)

        search = ModelSearch(space, ctx, 0, prior=prior, prior_trust=True, top_veto=veto)
        for config, fraction in zip(configs[:7], fractions[:7], strict=True):
            search.observe(config, fraction)
        assert search.top_agreement() is None  # seven successes: not yet
        for config, fraction in zip(configs[7:], fractions[7:], strict=True):
            search.observe(config, fraction)
        agreement = search.agreement()
        assert agreement is not None and agreement > 0.4
        expected = agreement if trusted == "agreement" else trusted
        assert search.trust() == pytest.approx(expected)
        assert search.top_agreement() == pytest.approx(-1.0 if order[5] == 10 else 1.0)
    # "mapped": vetoed only for a measured prior whose source grid does not hold this space's.
    wrong = [1, 2, 3, 4, 5, 10, 9, 8, 7, 6]
    by_key = {canonical_json(c): float(r) for c, r in zip(configs, wrong, strict=True)}
    grid = {p.name: list(p.values()) for p in space.params}
    coarse = {name: values[::2] for name, values in grid.items()}
    for source_grid, trusted in ((grid, "agreement"), (coarse, 0.0)):
        measured = MeasuredPrior(lambda c: by_key.get(canonical_json(c), 0.0), source_grid)
        search = ModelSearch(space, ctx, 0, prior=measured, prior_trust=True, top_veto="mapped")
        for config, fraction in zip(configs, fractions, strict=True):
            search.observe(config, fraction)
        assert search.trust() == pytest.approx(
            search.agreement() if trusted == "agreement" else trusted)
    with pytest.raises(ValueError, match="top_veto"):
        ModelSearch(space, ctx, 0, top_veto="sometimes")


def test_a_measured_prior_holds_a_space_only_where_its_source_measured_every_value():
    space = SearchSpace("t", (Choice("BLOCK_M", (16, 32, 64)), Choice("num_warps", (4,))))
    finer = measured_prior([({"block_m": b}, 0.5) for b in (16, 32, 64, 128)])
    coarse = measured_prior([({"BlockM": b}, 0.5) for b in (16, 64)])
    renamed = measured_prior([({"tile": b}, 0.5) for b in (16, 32, 64)])
    assert finer is not None and coarse is not None and renamed is not None
    assert finer.holds(space)  # names compared normalised; num_warps has one value
    assert not coarse.holds(space) and not renamed.holds(space)


def test_a_cold_search_reports_full_trust_and_no_agreement():
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    search = ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), 0)
    assert search.agreement() is None and search.trust() == 1.0


def test_the_transfer_benchmark_regrids_sources_and_scores_the_worst_pair():
    sys.path.insert(0, str(ROOT))
    from benchmarks.search_transfer import regridded
    from benchmarks.search_transfer import respelt
    from benchmarks.search_transfer import score

    assert respelt("block_size_x") == "BlockSizeX"
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    results = regridded(rec)
    assert {k for config, _ in results for k in config} == {respelt(k) for k in rec.keys}
    assert {c["TileSize"] for c, _ in results} == set(rec.grid["tile_size"][::2])
    assert 0 < len(results) < len(rec.entries)

    def row(gains):
        return {"cold": {b: {"mean": 0.5} for b in ("10", "20", "50")},
                "warm": {"v": {b: {"mean": 0.5 + g} for b, g in zip(("10", "20", "50"), gains,
                                                                       strict=True)}}}
    steady, one_bad = [row([0.1, 0.1, 0.1])], [row([0.3, 0.3, -0.2])]
    assert score(steady, "v") == pytest.approx(0.1)
    assert score(one_bad, "v") < score(steady, "v")  # the worst shortfall counts twice over


def test_the_transfer_benchmark_counts_cells_below_cold_at_one_and_two_se():
    """``flagged`` counts the (pair, B) cells of a search below cold by more than k se of the
    difference: the cold search run again on other seeds is counted the same way."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.search_transfer import AGAIN
    from benchmarks.search_transfer import flagged

    def cells(*means):
        return {b: {"mean": m, "se": 0.03} for b, m in zip(("10", "20", "50"), means,
                                                           strict=True)}
    # se of a difference: hypot(0.03, 0.03) = 0.042; 0.05 below is past 1 se, not past 2.
    rows = [{"cold": cells(0.8, 0.9, 0.95), "held_out": cells(0.75, 0.9, 0.85),
             AGAIN: cells(0.8, 0.85, 0.95)}]
    assert flagged(rows, "held_out") == 2 and flagged(rows, "held_out", 2) == 1
    assert flagged(rows, AGAIN) == 1 and flagged(rows, AGAIN, 2) == 0
    assert flagged([{"cold": cells(0.8, 0.9, 0.95)}], AGAIN) == 0  # not run: nothing counted


def test_the_transfer_benchmark_chooses_on_a_single_family_without_failing():
    """``--families convolution`` leaves no other family to choose on: the pick is then made on
    the family's own pairs instead of failing after the runs."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.search_transfer import choose

    def row(family, gains):
        return {"family": family, "cold": {b: {"mean": 0.5} for b in ("10", "20", "50")},
                "warm": {v: {b: {"mean": 0.5 + g} for b in ("10", "20", "50")}
                         for v, g in gains.items()}}
    rows = [row("convolution", {"hedged": 0.1, "hedged60": 0.0})]
    assert choose(rows, ["hedged", "hedged60"]) == {"convolution": "hedged"}
    rows.append(row("gemm", {"hedged": -0.1, "hedged60": 0.05}))
    assert choose(rows, ["hedged", "hedged60"]) == {"convolution": "hedged60", "gemm": "hedged"}
