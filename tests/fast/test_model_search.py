"""The default search's parts: the rank transform of its local steps, the local steps
themselves (single-parameter moves from the best measured configs, two-parameter moves from
the best one when the search is stuck, other basins when it stays stuck) and the feasibility
model."""

from __future__ import annotations

import numpy as np
import pytest

from search_spaces import Context
from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tests.conftest import replay_file
from tuner.search.gp import normal_scores
from tuner.search.model_search import ModelSearch
from tuner.search.proposer import Told


def test_normal_scores_keep_order_share_ties_and_are_symmetric():
    scores = normal_scores(np.array([3.0, 1.0, 2.0, 1.0, 5.0]))
    assert scores[1] == scores[3]  # tied values share their mean rank
    assert scores[3] < scores[2] < scores[0] < scores[4]
    assert abs(scores[4] - 1.2815515655) < 1e-6  # the 0.9 quantile: rank 4 of 5
    distinct = normal_scores(np.array([0.3, -7.0, 2.0, 1.0]))
    assert abs(distinct.sum()) < 1e-9  # (r + 0.5) / n is symmetric about the median
    # Scale is gone: a near-tie at the top is as far apart as any two neighbours.
    near = normal_scores(np.array([-2.0, -1.0, 0.0, 0.0001]))
    assert near[3] - near[2] == near[1] - near[0]


def test_every_second_guided_proposal_moves_a_best_config_widening_when_stuck():
    """Local steps: one parameter of one of the three best configs; two parameters of the best
    one too once ``widen_after`` measurements have brought no new best (the stalled
    alternatives off: ``tests/fast/test_local_steps.py`` checks those)."""
    rec = load_recording(replay_file("dedispersion_A4000.json.gz"))
    space = recorded_space(rec)
    search = ModelSearch(space, Context(rec.problem(), "fp32"), seed=3, explore_after=0,
                         diverse_tops="never", alternatives_after=0)
    measured: list[tuple[float, dict]] = []
    kinds = {"one": 0, "two": 0}
    for n in range(80):
        asked = search.ask()
        assert asked is not None
        guided = n - search.n_init + 1  # 1, 2, ... once the start is spent
        if guided > 0 and guided % search.local_every == 0:
            tops = [c for _, c in sorted(measured, key=lambda m: -m[0])[:search.local_top]]
            changed = [sum(asked.config[k] != top[k] for k in top) for top in tops]
            since_best = len(measured) - 1 - max(range(len(measured)),
                                                 key=lambda i: measured[i][0])
            if 1 in changed:
                kinds["one"] += 1
            else:
                assert since_best >= search.widen_after and changed[0] == 2
                kinds["two"] += 1
        fraction = rec.best_time_ms() / rec.entries[rec.key_of(asked.config)]["time"]
        measured.append((fraction, asked.config))
        search.tell(asked.number, fraction)
    assert sum(kinds.values()) == 36 and kinds["one"] > 0 and kinds["two"] > 0, kinds


def _basin_bests(measured: list[tuple[float, dict]], n: int) -> list[dict]:
    """The best config, then best first each one >= 3 parameters from all picked so far."""
    picked: list[dict] = []
    for _, config in sorted(measured, key=lambda m: -m[0]):
        if all(sum(config[k] != p[k] for k in p) >= 3 for p in picked):
            picked.append(config)
    return picked[:n]


@pytest.mark.parametrize("tops_rule", ["always", "mixed"])
def test_local_steps_move_the_best_config_of_another_basin_too(tops_rule):
    """``diverse_tops="always"``: a local step changes one parameter of the best config of one
    of the three best basins; ``"mixed"``: of one of the two best configs or of the best config
    of the best other basin (two parameters of the best one's once stalled, either way); on this
    space some local steps start from a basin other than the best one's (the stalled
    alternatives off)."""
    rec = load_recording(replay_file("convolution_A6000.json.gz"))
    search = ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=1,
                         diverse_tops=tops_rule, alternatives_after=0)
    measured: list[tuple[float, dict]] = []
    elsewhere = 0
    for n in range(60):
        asked = search.ask()
        assert asked is not None
        guided = n - search.n_init + 1
        if guided > 0 and guided % search.local_every == 0 and len(measured) >= 2:
            tops = _basin_bests(measured, search.local_top)
            if tops_rule == "mixed":
                ranked = [c for _, c in sorted(measured, key=lambda m: -m[0])]
                tops = ranked[:search.local_top - 1] + tops[1:2]
            changed = [sum(asked.config[k] != top[k] for k in top) for top in tops]
            assert 1 in changed or changed[0] == 2, changed
            elsewhere += changed[0] > 2
        entry = rec.entries[rec.key_of(asked.config)]
        t = entry["time"]
        fraction = rec.best_time_ms() / t if isinstance(t, int | float) and t > 0 else None
        measured.append((fraction or 0.0, asked.config))
        search.tell(asked.number, fraction)
    assert elsewhere > 0


def test_an_unknown_choice_of_local_tops_is_refused():
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    with pytest.raises(ValueError, match="diverse_tops must be one of"):
        ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=0,
                    diverse_tops="sometimes")
    with pytest.raises(ValueError, match="pow2_features must be one of"):
        ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=0,
                    pow2_features="yes")


def test_moves_change_exactly_the_asked_number_of_parameters():
    rec = load_recording(replay_file("pnpoly_RTX_3090.json.gz"))
    space = recorded_space(rec)
    search = ModelSearch(space, Context(rec.problem(), "fp32"), seed=0)
    candidates = search._ensure()
    free = set(range(len(candidates)))
    base = candidates[0]
    for depth in (1, 2):
        moved = [candidates[j] for j in search._moves(0, free, depth)]
        assert moved and all(sum(c[k] != base[k] for k in base) == depth for c in moved)
        # every valid config at that distance is there
        assert len(moved) == sum(sum(c[k] != base[k] for k in base) == depth
                                 for c in candidates)


def _measure(rec, search: ModelSearch, n: int) -> list[tuple[float, dict]]:
    measured = []
    for _ in range(n):
        asked = search.ask()
        assert asked is not None
        t = rec.entries[rec.key_of(asked.config)]["time"]
        fraction = rec.best_time_ms() / t if isinstance(t, int | float) else None
        search.tell(asked.number, fraction)
        measured.append((fraction or 0.0, asked.config))
    return measured


def test_the_feasibility_model_rates_failing_regions_lower():
    """Told 80 random configs of a recording where 11 % of configs fail, the model rates the
    failing configs it has not seen lower, on average, than the ones that run."""
    rec = load_recording(replay_file("convolution_A6000.json.gz"))  # 473 of 4,362 fail
    keys = list(rec.entries)
    for seed in (1, 2, 3):
        search = ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=seed)
        rng = np.random.default_rng(seed)
        history = []
        for n, i in enumerate(rng.choice(len(keys), 80, replace=False)):
            entry = rec.entries[keys[i]]
            config = {k: entry[k] for k in rec.keys}
            t = entry["time"]
            history.append(Told(n, config, True,
                                rec.best_time_ms() / t if isinstance(t, int | float) else None))
        search.rebuild(history)
        search.ask()  # a guided step: fits the model
        candidates = search._ensure()
        unseen = np.array([i not in search.observed for i in range(len(candidates))])
        p = search._feasible(np.arange(len(candidates)), search._gp)
        fails = np.array([not isinstance(rec.entries[rec.key_of(c)]["time"], int | float)
                          for c in candidates])
        assert p.min() > 0.0 and p.max() <= 1.0
        assert p[fails & unseen].mean() < p[~fails & unseen].mean() - 0.05
    off = ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=1,
                      feasibility=False)
    _measure(rec, off, 20)
    assert (off._feasible(np.arange(5), off._gp) == 1.0).all()


def test_a_search_that_stays_stuck_refines_other_basins():
    """After ``explore_after`` measurements without a new best, local steps start from the best
    config of one basin after another (configs >= 3 parameters apart), not only the best."""
    rec = load_recording(replay_file("convolution_W6600.json.gz"))  # a 4-config needle
    search = ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=0,
                         explore_after=5)
    measured = _measure(rec, search, 40)
    best = max(measured, key=lambda m: m[0])[1]
    late = [c for _, c in measured[20:]]
    far = [c for c in late if sum(c[k] != best[k] for k in best) >= 3]
    assert search._rotation > 0 and far


def test_the_power_of_two_flags_switch_on_where_other_block_sizes_fall_off_a_cliff():
    """On the W6600 convolution recording every block size but the powers of two is about ten
    times slower: after 40 measurements the default search's log-fraction GP has switched the
    power-of-two flags on; with ``pow2_features="off"`` it has none."""
    from tuner.search.gp import OFF_LENGTH

    rec = load_recording(replay_file("convolution_W6600.json.gz"))
    space, ctx = recorded_space(rec), Context(rec.problem(), "fp32")
    for mode in ("auto", "off"):
        search = ModelSearch(space, ctx, seed=0, pow2_features=mode)
        measured: set[str] = set()
        while len(measured) < 40:
            asked = search.ask()
            assert asked is not None
            key = rec.key_of(asked.config)
            t = rec.entries[key]["time"]
            search.tell(asked.number, rec.best_time_ms() / t if key not in measured else None)
            measured.add(key)
        flags = search.encoder.pow2_columns
        assert search._gp.lengths is not None
        if mode == "auto":
            assert len(flags) == 3 and (search._gp.lengths[list(flags)] < OFF_LENGTH).all()
        else:
            assert flags == ()
