"""A small Gaussian-process regressor in NumPy (Matérn 5/2, automatic relevance per feature).

Hyperparameters are chosen by maximising the log marginal likelihood over a coarse grid
(a shared length scale, then one refinement pass per feature) — no gradient optimiser needed
for the few hundred points a tuning run has. Targets are standardised internally.

**Optional** features (``optional``: column indices) are switched on (at the shared length
scale) or off (a length scale so long they play no part), together: the grid is searched both
ways and "on" must lower the negative log marginal likelihood by more than the
Bayesian-information-criterion price of their hyperparameters, ``0.5 ln n`` each (the price
decides on or off; the per-feature pass after it compares plain likelihoods). A feature
that matters on some problems only (a block size being a power of two) then costs little where
it does not matter.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

SQRT5 = math.sqrt(5.0)
LENGTH_GRID = (0.05, 0.1, 0.2, 0.35, 0.6, 1.0, 2.0)
NOISE_GRID = (1e-4, 1e-2, 1e-1)
RELEVANCE_GRID = (0.25, 1.0, 4.0)  # per-feature multipliers of the shared length scale
#: Length scale of a switched-off optional feature (features lie in [0, 1]).
OFF_LENGTH = 1e6


def matern52(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Matérn 5/2 kernel matrix between the rows of ``a`` and ``b`` (unit variance)."""
    sa, sb = a / lengths, b / lengths
    # (1 + √5 d + 5/3 d²) exp(-√5 d), each step in place on three (len(a), len(b)) buffers:
    # the same operations in the same order as the plain expression, so bit for bit its value.
    buf = (2.0 * sa) @ sb.T
    d = np.add((sa * sa).sum(1)[:, None], (sb * sb).sum(1)[None, :])
    np.subtract(d, buf, out=d)
    np.maximum(d, 0.0, out=d)
    np.sqrt(d, out=d)
    k: np.ndarray = np.multiply(d, 5.0 / 3.0)
    k *= d
    np.multiply(d, SQRT5, out=buf)
    buf += 1.0
    k += buf
    np.multiply(d, -SQRT5, out=buf)
    np.exp(buf, out=buf)
    k *= buf
    return k


def success_share(x: np.ndarray, measured: np.ndarray, ok: np.ndarray,
                  lengths: np.ndarray) -> np.ndarray:
    """Estimated probability that each row of ``x`` runs: the kernel-weighted (``matern52``
    under ``lengths``) share of successes (``ok``) among the ``measured`` rows, with one
    pseudo-success and one pseudo-failure (Laplace smoothing); 1.0 where no failure is near,
    so a config far from every failure keeps ~1."""
    weights = matern52(x, measured, lengths)
    near_failures = weights @ (~ok).astype(float)
    successes = weights @ ok.astype(float)
    share: np.ndarray = (successes + 1.0) / (successes + near_failures + 2.0)
    return np.where(near_failures < 1e-3, 1.0, share)


def negative_log_likelihood(kernel: np.ndarray, y: np.ndarray, noise: float) -> float:
    """Negative log marginal likelihood of targets ``y`` (n,) under the covariance ``kernel``
    (n, n) plus ``noise`` on the diagonal, without its constant ``n/2 ln 2 pi``; ``inf`` when
    that covariance is not positive definite.

    One Cholesky factorisation of the covariance bordered by ``y`` gives both terms: its last
    row is ``z = L^-1 y`` (so the data fit is ``z.z / 2``) and its first ``n`` diagonal entries
    are ``L``'s (so the log determinant is twice their log sum). The corner entry only has to
    keep the bordered matrix positive definite: ``y.y / noise + 1`` exceeds ``y' K^-1 y``
    because every eigenvalue of the covariance is at least ``noise``.
    """
    n = len(y)
    bordered = np.empty((n + 1, n + 1))
    bordered[:n, :n] = kernel
    bordered[np.arange(n), np.arange(n)] += noise
    bordered[n, :n] = bordered[:n, n] = y
    bordered[n, n] = float(y @ y) / noise + 1.0
    try:
        chol = np.linalg.cholesky(bordered)
    except np.linalg.LinAlgError:
        return math.inf
    z = chol[n, :n]
    return float(0.5 * z @ z + np.log(np.diag(chol)[:n]).sum())


def normal_cdf(z: np.ndarray) -> np.ndarray:
    """Standard normal CDF (Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7)."""
    x = np.abs(z) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
        -1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-x * x)
    cdf: np.ndarray = 0.5 * (1.0 + np.sign(z) * erf)
    return cdf


#: New points after which ``GaussianProcess.fit_believing`` re-chooses the hyperparameters.
REFIT_EVERY = 8


class GaussianProcess:
    def __init__(self, optional: tuple[int, ...] = ()) -> None:
        self.optional = optional
        self.lengths: np.ndarray | None = None
        self.noise = 1e-2
        self.tuned_at: int | None = None  # points the hyperparameters were last chosen on

    def _nll(self, x: np.ndarray, y: np.ndarray, lengths: np.ndarray, noise: float) -> float:
        return negative_log_likelihood(matern52(x, x, lengths), y, noise)

    def fit_hyperparameters(self, x: np.ndarray, y: np.ndarray) -> None:
        ys = self._standardise(y)
        width = x.shape[1]
        optional = [j for j in self.optional if j < width]
        price = 0.5 * math.log(len(x)) * len(optional)  # BIC: the optional features' scales
        best = (math.inf, math.inf, np.ones(width), 1e-2)  # (priced nll, nll, lengths, noise)
        for switched_on in ((False, True) if optional else (False,)):
            for length in LENGTH_GRID:
                lengths = np.full(width, length)
                if not switched_on:
                    lengths[optional] = OFF_LENGTH
                kernel = matern52(x, x, lengths)  # one kernel matrix for every noise level
                for noise in NOISE_GRID:
                    raw = negative_log_likelihood(kernel, ys, noise)
                    priced = raw + (price if switched_on else 0.0)
                    if priced < best[0]:
                        best = (priced, raw, lengths, noise)
        _, nll, lengths, noise = best  # the relevance pass compares likelihoods, not prices
        for j in range(width):  # one relevance pass: stretch or shrink each feature's scale
            if lengths[j] == OFF_LENGTH:
                continue  # an optional feature the data do not pay for stays off
            for factor in RELEVANCE_GRID:
                if factor == 1.0:
                    continue  # the current scale: its likelihood is ``nll`` already
                trial = lengths.copy()
                trial[j] = lengths[j] * factor
                value = self._nll(x, ys, trial, noise)
                if value < nll:
                    nll, lengths = value, trial
        self.lengths, self.noise, self.tuned_at = lengths, noise, len(x)

    def _standardise(self, y: np.ndarray) -> np.ndarray:
        self._mean = float(y.mean())
        self._std = float(y.std()) or 1.0
        return (y - self._mean) / self._std

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        if self.lengths is None or len(self.lengths) != x.shape[1]:
            self.fit_hyperparameters(x, y)
        assert self.lengths is not None
        self._x = x
        ys = self._standardise(y)
        k = matern52(x, x, self.lengths) + self.noise * np.eye(len(x))
        chol = np.linalg.cholesky(k + 1e-9 * np.eye(len(x)))
        self._chol_inv = np.linalg.inv(chol)  # small (n x n): prediction is then two matmuls
        self._alpha = self._chol_inv.T @ (self._chol_inv @ ys)

    def fit_believing(self, x: np.ndarray, y: np.ndarray, pending: np.ndarray) -> None:
        """Fit to the measured points ``x`` (targets ``y``), re-choosing the hyperparameters
        every REFIT_EVERY new points, or every eighth of them once there are many (the grid
        search is most of a proposal's CPU time; late points move them little); then the
        in-flight points ``pending`` count at their predicted value (kriging believer), so
        successive proposals spread out."""
        if self.tuned_at is None or len(x) - self.tuned_at >= max(REFIT_EVERY, len(x) // 8):
            self.fit_hyperparameters(x, y)
        self.fit(x, y)
        if len(pending):
            believed, _ = self.predict(pending)
            self.fit(np.vstack([x, pending]), np.concatenate([y, believed]))

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation, in the units of the fitted targets."""
        assert self.lengths is not None
        ks = matern52(x, self._x, self.lengths)
        mean = ks @ self._alpha
        v = self._chol_inv @ ks.T
        var = np.maximum(1.0 - (v * v).sum(0), 1e-12)
        return mean * self._std + self._mean, np.sqrt(var) * self._std


def ranks(y: np.ndarray) -> np.ndarray:
    """0-based ranks of ``y`` (ascending), tied values sharing their mean rank."""
    _, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
    out: np.ndarray = (np.cumsum(counts) - counts + (counts - 1) / 2.0)[inverse]
    return out


def normal_scores(y: np.ndarray) -> np.ndarray:
    """The Gaussian copula of ``y``: each value replaced by the standard normal quantile of its
    rank, (rank + 0.5) / n, tied values sharing their mean rank. Order is kept; scale is not."""
    inv = NormalDist().inv_cdf
    return np.array([inv((r + 0.5) / len(y)) for r in ranks(y)])


def rank_agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (ties at their mean rank), in [-1, 1];
    0.0 when either is constant (no order to agree with)."""
    ra, rb = ranks(a) - (len(a) - 1) / 2.0, ranks(b) - (len(b) - 1) / 2.0
    norm = math.sqrt(float((ra * ra).sum() * (rb * rb).sum()))
    return float((ra * rb).sum() / norm) if norm > 0 else 0.0


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float,
                         xi: float = 0.0) -> np.ndarray:
    """EI of maximising: E[max(f - best - xi, 0)] under N(mean, std)."""
    z = (mean - best - xi) / std
    cdf = normal_cdf(z)
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    ei: np.ndarray = (mean - best - xi) * cdf + std * pdf
    return ei
