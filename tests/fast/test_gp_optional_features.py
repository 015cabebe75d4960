"""Optional features of the search's Gaussian process (``tuner.search.gp``): switched on only
where the data's likelihood pays for them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.search.gp import LENGTH_GRID
from tuner.search.gp import NOISE_GRID
from tuner.search.gp import OFF_LENGTH
from tuner.search.gp import SQRT5
from tuner.search.gp import GaussianProcess
from tuner.search.gp import matern52
from tuner.search.gp import negative_log_likelihood


def _points(seed: int, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """A smooth feature in [0, 1] and a 0/1 flag (column 1), drawn at random."""
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.random(n), rng.integers(0, 2, n).astype(float)]), rng.random(n)


def test_a_flag_that_splits_the_values_is_switched_on():
    """Values ten times lower where the flag is 0 (a cliff at every other block size): the flag
    gets a finite length scale and the model tells the two sides apart."""
    x, noise = _points(0)
    y = np.where(x[:, 1] == 1.0, 0.0, -2.3) + 0.3 * x[:, 0] + 0.01 * noise
    gp = GaussianProcess(optional=(1,))
    gp.fit(x, y)
    assert gp.lengths is not None and gp.lengths[1] < OFF_LENGTH
    mean, _ = gp.predict(np.array([[0.5, 1.0], [0.5, 0.0]]))
    assert mean[0] - mean[1] > 1.5


def test_a_flag_the_values_ignore_stays_off_and_changes_nothing():
    """Values that depend on the smooth feature only: the flag stays off, and predictions are
    those of a model without it."""
    x, noise = _points(1)
    y = np.sin(4 * x[:, 0]) + 0.01 * noise
    with_flag, without = GaussianProcess(optional=(1,)), GaussianProcess()
    with_flag.fit(x, y)
    without.fit(x[:, :1], y)
    assert with_flag.lengths is not None and with_flag.lengths[1] == OFF_LENGTH
    grid = np.linspace(0, 1, 7)
    a, _ = with_flag.predict(np.column_stack([grid, np.ones(7)]))
    b, _ = without.predict(grid[:, None])
    assert np.allclose(a, b, atol=1e-3)


def test_without_optional_features_the_fit_is_the_plain_grid_search():
    x, noise = _points(2)
    y = x[:, 0] + noise
    gp = GaussianProcess()
    gp.fit(x, y)
    assert gp.lengths is not None and (gp.lengths < OFF_LENGTH).all()


def test_the_relevance_pass_after_a_switched_on_flag_only_improves_the_likelihood():
    """The flags' price decides on or off; it must not let the per-feature pass accept scales
    that fit worse: the chosen scales fit at least as well as the best shared scale (a draw
    where charging the price to the pass's comparison did accept a worse fit)."""
    rng = np.random.default_rng(182)
    n, width = int(rng.integers(15, 60)), int(rng.integers(2, 6))
    x = np.column_stack([rng.random((n, width)), rng.integers(0, 2, n).astype(float)])
    y = (rng.normal() * np.where(x[:, width] == 1, 0.0, -1.0)
         + np.sin(rng.random() * 8 * x[:, 0]) + rng.random() * x[:, 1]
         + rng.random() * 0.5 * rng.random(n))
    gp = GaussianProcess(optional=(width,))
    gp.fit_hyperparameters(x, y)
    assert gp.lengths is not None and gp.lengths[width] < OFF_LENGTH
    ys = (y - y.mean()) / y.std()
    shared = min(gp._nll(x, ys, np.full(width + 1, length), noise_level)
                 for length in LENGTH_GRID for noise_level in NOISE_GRID)
    assert gp._nll(x, ys, gp.lengths, gp.noise) <= shared + 1e-9


def test_the_matern_kernel_in_place_is_the_plain_formula_bit_for_bit():
    """``matern52`` reuses its buffers; its values are those of the textbook expression."""
    rng = np.random.default_rng(5)
    a, b = rng.random((37, 4)), rng.random((23, 4))
    lengths = np.array([0.05, 0.35, 1.0, OFF_LENGTH])
    sa, sb = a / lengths, b / lengths
    sq = (sa * sa).sum(1)[:, None] + (sb * sb).sum(1)[None, :] - 2.0 * sa @ sb.T
    d = np.sqrt(np.maximum(sq, 0.0))
    plain = (1.0 + SQRT5 * d + 5.0 / 3.0 * d * d) * np.exp(-SQRT5 * d)
    assert np.array_equal(matern52(a, b, lengths), plain)


def test_the_bordered_likelihood_is_the_textbook_one():
    """One factorisation of the covariance bordered by the targets gives the textbook negative
    log marginal likelihood (Cholesky, two solves, the diagonal's log sum), to rounding; and
    ``inf`` for a covariance that is not positive definite."""
    rng = np.random.default_rng(11)
    for _ in range(40):
        n, width = int(rng.integers(3, 120)), int(rng.integers(1, 8))
        x, y = rng.random((n, width)), rng.standard_normal(n) * rng.choice([0.1, 1.0, 30.0])
        kernel = matern52(x, x, rng.choice(np.array(LENGTH_GRID), width))
        noise = float(rng.choice(np.array(NOISE_GRID)))
        chol = np.linalg.cholesky(kernel + noise * np.eye(n))
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
        textbook = 0.5 * y @ alpha + np.log(np.diag(chol)).sum()
        assert negative_log_likelihood(kernel, y, noise) == pytest.approx(textbook, rel=1e-9)
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]])
    assert negative_log_likelihood(indefinite, np.array([0.3, -0.2]), 1e-4) == math.inf
