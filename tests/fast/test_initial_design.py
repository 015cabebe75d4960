"""The initial designs of the default search (``tuner.search.design``) on a recorded space."""

from __future__ import annotations

import numpy as np
import pytest

from search_spaces import Context
from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tests.conftest import replay_file
from tuner.search.design import InitialDesign
from tuner.search.design import cycle_of
from tuner.search.design import index_matrix
from tuner.search.design import latin_targets
from tuner.search.design import nearest_then_highest
from tuner.search.model_search import ModelSearch


def test_latin_targets_put_one_point_in_each_stratum_of_every_dimension():
    points = latin_targets(8, 5, np.random.default_rng(0))
    assert points.shape == (8, 5) and ((points >= 0) & (points < 1)).all()
    for dim in range(5):
        assert sorted(np.floor(points[:, dim] * 8).astype(int)) == list(range(8))


def test_index_matrix_scales_each_parameters_value_index_to_the_unit_interval():
    space = recorded_space(load_recording(replay_file("gemm_RTX_2080_Ti.json.gz")))
    first = {p.name: p.values()[0] for p in space.params}
    last = {p.name: p.values()[-1] for p in space.params}
    rows = index_matrix(space, [first, last, {}])
    several = [len(p.values()) > 1 for p in space.params]
    assert (rows[0][several] == 0).all() and (rows[1][several] == 1).all()
    assert (rows[0][~np.array(several)] == 0.5).all()
    assert np.isnan(rows[2]).all()  # a parameter a config lacks plays no part


def test_a_latin_hypercube_start_spreads_over_each_parameters_values():
    """Seven ``lhs`` starts on the GEMM space: every parameter with four values shows at least
    three of them (uniform draws among the valid configs favour the small tiles)."""
    rec = load_recording(replay_file("gemm_RTX_2080_Ti.json.gz"))
    search = ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=3, init="lhs")
    space = search.space
    configs = [search.ask() for _ in range(7)]
    assert all(c is not None for c in configs)
    wide = [p for p in space.params if len(p.values()) == 4]
    assert wide
    for p in wide:
        assert len({c.config[p.name] for c in configs if c is not None}) >= 3, p.name


def test_an_unknown_design_is_refused():
    for name in ("sobol", "cycle-", "cycle-RX", "RMSM"):
        with pytest.raises(ValueError, match="init must be one of"):
            InitialDesign(name, 7, np.random.default_rng(0), [2, 3])


def test_designs_are_cycles_of_random_maximin_and_snapped_picks():
    assert cycle_of("alternate") == "RM" and cycle_of("alternate-snap") == "RMSM"
    assert cycle_of("cycle-SMR") == "SMR" and cycle_of("lhs") is None


def test_a_snapped_pick_is_the_nearest_valid_config_ties_to_the_largest_values():
    rows = np.array([[0, 0], [3, 0], [2, 1], [1, 1], [0, 3], [np.nan, 2]], dtype=float)
    assert list(nearest_then_highest(rows, np.array([0, 0]))) == [0]  # valid: itself
    # (3, 3) is invalid; (3, 0), (2, 1) and (0, 3) are 3 away, (1, 1) is 4 away, and
    # (inactive, 2) is 1 away: an inactive parameter plays no part
    assert list(nearest_then_highest(rows, np.array([3, 3]))) == [5]
    assert list(nearest_then_highest(rows[:5], np.array([3, 3]))) == [1, 2, 4]
    assert list(nearest_then_highest(rows[:5], np.array([1, 0]))) == [3]  # (0, 0) is as near


def test_snapped_picks_shift_weight_from_the_small_tiles_constraints_over_admit():
    """On the GEMM space the divisibility constraints admit far more small tiles and narrow
    vectors than large: among the valid configs 47 % have MDIMC = 8 and 42 % VWM = 1, but 19 %
    VWM = 4 and 42 % MWG = 128. Snapped picks (a random grid point's nearest valid config)
    hold each of those values nearer its grid share."""
    rec = load_recording(replay_file("gemm_RTX_2080_Ti.json.gz"))
    space = recorded_space(rec)
    search = ModelSearch(space, Context(rec.problem(), "fp32"), seed=5, init="snap", n_init=80)
    picks = [search.ask() for _ in range(80)]
    configs = [p.config for p in picks if p is not None]
    assert len({tuple(sorted(c.items())) for c in configs}) == 80
    valid = search._ensure()

    def share(cs: list, name: str, value: int) -> float:
        return float(sum(c[name] == value for c in cs) / len(cs))

    def pair(cs: list, names: tuple[str, str], value: int) -> float:
        return (share(cs, names[0], value) + share(cs, names[1], value)) / 2

    for names, value in ((("MDIMC", "NDIMC"), 8), (("VWM", "VWN"), 1)):
        assert pair(configs, names, value) < pair(valid, names, value) - 0.06, names
    for names, value in ((("VWM", "VWN"), 4), (("MWG", "NWG"), 128)):
        assert pair(configs, names, value) > pair(valid, names, value) + 0.04, names
