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
                             alternatives_after=after, alternatives="local")
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


def test_elsewhere_keeps_the_pool_members_with_another_value_of_the_turns_column():
    rows = np.array([[0.0, 0.0, 0.5], [0.0, 1.0, 0.5], [1.0, 0.0, 0.5], [np.nan, 1.0, 0.5]])
    varied = local.varied_columns(rows)
    assert varied == [0, 1]  # the third column has one value
    pool = np.array([1, 2, 3])
    assert local.elsewhere(rows, varied, 0, pool, 0).tolist() == [2, 3]  # NaN: another value
    assert local.elsewhere(rows, varied, 0, pool, 1).tolist() == [1, 3]
    assert local.elsewhere(rows, varied, 0, pool, 2).tolist() == [2, 3]  # wraps round
    assert local.elsewhere(rows, [], 0, pool, 0).tolist() == []


def test_a_stalled_search_looks_elsewhere_and_sweeps_the_best_configs_neighbours():
    """On the A6000 convolution (seed 66 leaves the search before it at 0.899, one parameter
    from 0.972): once stalled, every global step proposes a config whose value of the turn's
    parameter differs from the best's, every local step one of the best config's
    single-parameter neighbours while any is left, and the run ends at the optimum."""
    rec = load_recording(replay_file("convolution_A6000.json.gz"))
    search = ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=66,
                         alternatives="elsewhere")
    candidates = search._ensure()
    names = [search.space.params[j].name for j in search._value_rows()[1]]
    best_fraction, checked = 0.0, {"global": 0, "local": 0}
    for _ in range(200):
        done = {i: y for i, y in search.observed.items() if y is not None}
        guided = len(search.observed) >= search.n_init and len(done) >= 2
        if guided and search._since_best() >= search.alternatives_after:
            top = max(done.values())
            bests = [i for i, y in done.items() if y == top]
            free = set(range(len(candidates))) - set(search.observed) - search.pending
            left = {int(j) for i in bests
                    for j in local.moves(search.space, candidates, search._index, i, free, 1)}
            name = names[(search._turn + 1) % len(names)]
            step = "local" if (search._steps + 1) % search.local_every == 0 else "global"
            asked = search.ask()
            assert asked is not None
            if step == "global":  # the first best, as the search takes it
                assert asked.config[name] != candidates[bests[0]][name]
                checked[step] += 1
            elif left:
                assert search._index_of(asked.config) in left
                checked[step] += 1
        else:
            asked = search.ask()
            assert asked is not None
        t = rec.entries[rec.key_of(asked.config)]["time"]
        fraction = rec.best_time_ms() / t if isinstance(t, float) else None
        best_fraction = max(best_fraction, fraction or 0.0)
        search.tell(asked.number, fraction)
    assert checked["global"] >= 20 and checked["local"] >= 10, checked
    assert best_fraction == 1.0


def test_a_climb_moves_its_head_up_and_starts_elsewhere_after_its_patience():
    space = recorded_space(load_recording(replay_file("convolution_W6600.json.gz")))
    candidates = [_conv(128, 1, 1, 4, 1, 0, 0),  # 0: the best
                  _conv(64, 1, 1, 4, 1, 0, 0),   # 1: the block_size_x alternative
                  _conv(128, 2, 1, 4, 1, 0, 0),  # 2: the block_size_y alternative
                  _conv(64, 1, 2, 4, 1, 0, 0),   # 3: a neighbour of 1
                  _conv(64, 1, 1, 2, 1, 0, 0),   # 4: another
                  _conv(128, 2, 2, 4, 1, 0, 0)]  # 5: a neighbour of 2
    observed: dict[int, float | None] = {0: 0.0, 1: -1.0, 2: -1.5}
    order = [0, 1, 2]
    around = {1: [3, 4], 2: [5], 3: [], 4: []}

    def neighbours(i: int) -> np.ndarray:
        return np.array([j for j in around.get(i, []) if j not in observed], dtype=int)

    climb = local.Climb(patience=1)
    assert climb.start(space, candidates, observed, order, neighbours).tolist() == [3, 4]
    assert climb.head == 1  # the block_size_x alternative
    climb.last, observed[3] = 3, -0.5  # better than the head: the head moves there
    near = climb.start(space, candidates, observed, order, neighbours)
    # 3 has no neighbour left: the climb starts again, from the block_size_y alternative.
    assert climb.head == 2 and near.tolist() == [5]
    climb.last, observed[5] = 5, None  # a failure is a miss; patience 1 is spent
    assert climb.start(space, candidates, observed, order, neighbours).tolist() == [4]
    # The next turns' parameters (tile sizes, flags) have no alternative among ``order``: the
    # turn wraps round to block_size_x's, whose neighbour 4 is left.
    assert climb.head == 1
    assert local.Climb(patience=1).start(space, candidates, observed, [0], neighbours).size == 0


def test_a_stalled_search_keeps_up_a_climb_out_of_the_use_shmem_basin():
    """On the A6000 convolution, seed 113 left the search that only looks elsewhere in the
    ``use_shmem=1`` basin at 0.778 (four parameters from the optimum). With a climb kept up
    across the stalled local steps, every climb step proposes a config one parameter from the
    climb's head, the climb starts from several alternatives, the first config above the
    basin is a climb step's and the run ends at the optimum."""
    rec = load_recording(replay_file("convolution_A6000.json.gz"))
    search = ModelSearch(recorded_space(rec), Context(rec.problem(), "fp32"), seed=113,
                         alternatives="climb", climb_patience=2)
    candidates = search._ensure()
    best_fraction, climb_steps, heads, first_out = 0.0, 0, set(), None
    for _ in range(200):
        asked = search.ask()
        assert asked is not None
        idx = search._index_of(asked.config)
        climbing = search._climb.last == idx
        if climbing:
            head = candidates[search._climb.head]
            assert sum(asked.config[k] != v for k, v in head.items()) == 1
            climb_steps += 1
            heads.add(search._climb.head)
        t = rec.entries[rec.key_of(asked.config)]["time"]
        fraction = rec.best_time_ms() / t if isinstance(t, float) else None
        if first_out is None and (fraction or 0.0) > 0.78:
            first_out = climbing
        best_fraction = max(best_fraction, fraction or 0.0)
        search.tell(asked.number, fraction)
    assert climb_steps >= 20 and len(heads) >= 3, (climb_steps, heads)
    assert first_out is True
    assert best_fraction == 1.0
