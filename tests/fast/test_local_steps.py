"""Where the default search's local steps start (``tuner.search.local``): the alternatives a
stalled search refines from."""

from __future__ import annotations

import numpy as np

from search_spaces import Context
from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tests.conftest import replay_file
from tuner.search import local
from tuner.search.model_search import ModelSearch

NAMES = ("block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "read_only",
         "use_padding", "use_shmem")


def _conv(*values: int) -> dict:
    return {**dict(zip(NAMES, values, strict=True)), "use_cmem": 1, "filter_height": 15,
            "filter_width": 15}


def test_the_alternative_is_the_best_config_with_another_value_of_the_turns_parameter():
    space = recorded_space(load_recording(replay_file("convolution_W6600.json.gz")))
    best, other_shmem, other_tiles = (_conv(128, 1, 1, 4, 1, 0, 0), _conv(128, 1, 1, 4, 1, 0, 1),
                                      _conv(64, 2, 1, 4, 1, 0, 0))
    candidates = [best, other_shmem, other_tiles]
    order = [0, 1, 2]  # best first
    # The parameters in turn, among those with more than one value (use_cmem has one):
    assert local.alternative(space, candidates, order, 0) == 2  # block_size_x
    assert local.alternative(space, candidates, order, 1) == 2  # block_size_y
    assert local.alternative(space, candidates, order, 6) == 1  # use_shmem
    # No measured config has another tile_size_x: the next parameter that has one (use_shmem).
    assert local.alternative(space, candidates, order, 2) == 1
    assert local.alternative(space, candidates, order, 7) == 2  # wraps round to block_size_x
    assert local.alternative(space, candidates, [0], 0) is None  # nothing but the best


def test_a_stalled_search_refines_from_the_alternatives_in_turn(monkeypatch):
    """With ``alternatives_after=5`` on the W6600 needle, once five measurements bring no new
    best every local step proposes a config one or two parameters from the alternative of that
    step, and the turn moves on; off (0), no alternative is ever asked for."""
    rec = load_recording(replay_file("convolution_W6600.json.gz"))
    picked: list[int] = []
    real = local.alternative

    def spy(space, candidates, order, turn):
        picked.append(real(space, candidates, order, turn))
        return picked[-1]

    monkeypatch.setattr(local, "alternative", spy)
    for after in (0, 5):
        picked.clear()
        search = ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=0,
                             alternatives_after=after)
        candidates = search._ensure()
        checked = 0
        for _ in range(60):
            before = len(picked)
            asked = search.ask()
            assert asked is not None
            if len(picked) > before and picked[-1] is not None:
                start = candidates[picked[-1]]
                assert sum(asked.config[k] != v for k, v in start.items()) in (1, 2)
                checked += 1
            t = rec.entries[rec.key_of(asked.config)]["time"]
            search.tell(asked.number, rec.best_time_ms() / t if isinstance(t, float) else None)
        if after:
            assert checked >= 5 and search._turn == len(picked), (checked, search._turn)
        else:
            assert not picked and search._turn == 0


def test_untried_keeps_the_moves_no_measured_config_but_the_base_is_beside():
    """Value indices of three parameters: the base, two measured configs, four moves."""
    rows = np.array([
        [0, 0, 0],  # 0: the base (the alternative)
        [0, 1, 1],  # 1: measured
        [2, 2, 0],  # 2: measured
        [1, 0, 0],  # 3: a move of the first parameter: two from 1 and from 2 -> untried
        [0, 1, 0],  # 4: one from measured 1 -> tried
        [2, 0, 0],  # 5: one from measured 2 -> tried
        [0, 0, 2],  # 6: two from 1 and three from 2 -> untried
    ], dtype=float)
    near = np.array([3, 4, 5, 6])
    assert local.untried(rows, [0, 1, 2], 0, near).tolist() == [3, 6]
    # Nothing measured but the base: every move is untried; no moves: none.
    assert local.untried(rows, [0], 0, near).tolist() == [3, 4, 5, 6]
    assert local.untried(rows, [0, 1], 0, np.array([], dtype=int)).tolist() == []
    # An inactive parameter (NaN) counts as one value of its own.
    rows[3, 2] = np.nan
    assert local.untried(rows, [0, 1, 2], 0, near).tolist() == [3, 6]


def test_with_untried_first_a_stalled_climb_from_an_alternative_goes_where_nothing_was_measured(
        monkeypatch):
    """On the A6000 convolution with ``untried_first``: every local step from an alternative
    that has untried moves proposes one of them; without it, the spy is never asked."""
    rec = load_recording(replay_file("convolution_A6000.json.gz"))
    offered: list[set[int]] = []
    real = local.untried

    def spy(rows, measured, base, near):
        out = real(rows, measured, base, near)
        offered.append({int(j) for j in out})
        return out

    monkeypatch.setattr(local, "untried", spy)
    for first in (False, True):
        offered.clear()
        search = ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=144,
                             alternatives_after=5, untried_first=first)
        checked = 0
        for _ in range(60):
            before = len(offered)
            asked = search.ask()
            assert asked is not None
            if len(offered) > before and offered[-1]:
                assert search._index_of(asked.config) in offered[-1]
                checked += 1
            t = rec.entries[rec.key_of(asked.config)]["time"]
            search.tell(asked.number, rec.best_time_ms() / t if isinstance(t, float) else None)
        assert checked >= 5 if first else not offered, checked
