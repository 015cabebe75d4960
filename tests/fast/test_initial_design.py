"""The initial designs of the default search (``tuner.search.design``) on a recorded space."""

from __future__ import annotations

import numpy as np
import pytest

from search_spaces import Context
from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tests.conftest import replay_file
from tuner.search.design import InitialDesign
from tuner.search.design import index_matrix
from tuner.search.design import latin_targets
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
    with pytest.raises(ValueError, match="init must be one of"):
        InitialDesign("sobol", 7, np.random.default_rng(0))
