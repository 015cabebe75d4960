"""Numeric features of configs (``tuner.search.encoding``), on recorded spaces."""

from __future__ import annotations

import numpy as np

from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tests.conftest import replay_file
from tuner.search.encoding import Encoder
from tuner.search.encoding import is_power_of_two
from tuner.search.encoding import mixes_powers_of_two


def test_powers_of_two_are_positive_ints_only():
    assert [v for v in range(0, 70) if is_power_of_two(v)] == [1, 2, 4, 8, 16, 32, 64]
    assert not is_power_of_two(True) and not is_power_of_two(4.0) and not is_power_of_two(-4)


def test_only_integer_lists_with_and_without_powers_of_two_mix():
    assert mixes_powers_of_two([16, 32, 48, 64])
    assert mixes_powers_of_two([1, 2, 3, 4])
    assert not mixes_powers_of_two([16, 32, 64])  # all powers of two: nothing to tell apart
    assert not mixes_powers_of_two([0, 1])  # a switch: 0 is no size
    assert not mixes_powers_of_two([3, 5, 6])
    assert not mixes_powers_of_two(["a", 2, 3])
    assert not mixes_powers_of_two([])


def test_the_power_of_two_feature_marks_block_sizes_and_tiles_of_the_convolution_space():
    """The convolution space's block_size_x runs 16, 32, 48, … 256 and its tiles 1 … 4: with
    ``pow2`` each gains a feature, 1.0 at a power of two; the 0/1 switches and block_size_y
    (all powers of two) gain none."""
    space = recorded_space(load_recording(replay_file("convolution_W6600.json.gz")))
    plain, marked = Encoder(space), Encoder(space, pow2=True)
    assert marked.width == plain.width + 3  # block_size_x, tile_size_x, tile_size_y
    base = {p.name: p.values()[0] for p in space.params}
    rows = {}
    for bx in (32, 48, 64):
        rows[bx] = marked.encode({**base, "block_size_x": bx, "tile_size_x": 3})
    # The position feature of block_size_x orders 32 < 48 < 64; the extra one splits them.
    differs = [j for j in range(marked.width) if len({rows[b][j] for b in rows}) > 1]
    assert len(differs) == 2
    position, flag = differs
    assert rows[32][position] < rows[48][position] < rows[64][position]
    assert (rows[32][flag], rows[48][flag], rows[64][flag]) == (1.0, 0.0, 1.0)
    assert np.array_equal(plain.encode(base), np.delete(
        marked.encode(base), [j for j in range(marked.width) if j not in _plain_columns(marked)]))


def _plain_columns(encoder: Encoder) -> list[int]:
    """Indices (after dropping constant features) of the columns that are not ``pow2``."""
    kept = [encoder._columns[i] for i in encoder._keep]
    return [j for j, (_, (kind, _)) in enumerate(kept) if kind != "pow2"]
