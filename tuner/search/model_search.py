"""The default search (``auto``): model-guided, constraint-aware, never repeating itself.

It proposes only configs that satisfy every static constraint of the problem (the valid set is
enumerated up front, or sampled when it is huge), never proposes a config twice, and spends the
budget in two phases:

1. **Start**: the ``warm_start`` configs that are valid here (the best configs of related
   problems, from the database: ``tuner.search.transfer``), the space's seed configs that are
   valid (e.g. Triton's tutorial list), then the initial design (``init``,
   ``tuner.search.design``; by default ``alternate-snap``: valid configs drawn uniformly at
   random, by greedy maximin in feature space and *snapped* — a random point of the whole grid
   moved to its nearest valid config, which spreads the picks over each parameter's values
   where constraints over-admit small tiles — in the cycle random, maximin, snapped, maximin:
   typical configs, the corners and the large tiles), ``n_init`` in all;
2. **Model-guided**: a Gaussian process on log(roofline fraction) over every measured config
   (failed configs enter at the worst value seen; ``failed_in_model=False`` leaves them out)
   ranks the unmeasured valid configs by expected improvement times their estimated
   probability of running (the **feasibility model**, ``feasibility``: the kernel-weighted
   share of successes among the measured configs near each candidate); every
   ``local_every``-th proposal instead maximises it among the configs one parameter away from
   ``local_top`` measured configs — by default (``diverse_tops="mixed"``) the two best and the
   best of the best other basin (``DIVERSE_PARAMS`` or more parameters apart; ``"never"``: the
   three best; ``"always"``: the best of each of the three best basins; ``"stalled"``: those
   once ``widen_after`` measurements bring no new best), and once ``widen_after``
   measurements bring no new best also two parameters from the best — under a second GP
   fitted to the normal scores of the ranks (near the optimum the differences that matter are
   finer than the log model's noise). Configs in flight are fantasised at their predicted
   value (kriging believer), so proposals in a row spread out. ``explore_after`` (0: off) is
   a measured candidate not chosen (stalled: basins in turn, an upper confidence bound).
   **Stalled** (``alternatives_after`` = 10 measurements without a new best; 0: never), with
   ``alternatives="climb"`` (the default) each global step is the model's pick among the
   configs whose value of one parameter differs from the best config's, the parameters in
   turn (``tuner.search.local.elsewhere``: a needle optimum sits where the model has learnt a
   value is poor on average, say ``use_shmem=0``); each local step first measures the best
   config's single-parameter neighbours that are left, then climbs: a hill climb kept up from
   step to step from an *alternative* (the best config of another value of one parameter),
   started again from the next parameter's after ``climb_patience`` steps that do not climb
   (``tuner.search.local.Climb``). ``"elsewhere"`` (the default before) leaves the climb out;
   ``"local"`` starts each stalled local step from an alternative, one step each.

Both GPs see, besides each parameter's value, whether an integer size is a power of two where
the space mixes both (``pow2_features="auto"``, ``tuner.search.encoding``): a flag switched on
only where the measured data's likelihood pays for it (``tuner.search.gp``), so a GPU where
every block size but the powers of two is ten times slower is learnt in a few measurements,
and a space where it does not matter is modelled as without it. The initial design and the
scored pool spread over the plain features.

A **prior** (a predicted log fraction per config: the kernel's model, or another GPU's results,
``tuner.search.transfer``) is believed whole; ``prior_trust=True`` (what the hedge's warm
twin uses, ``tuner.search.hedged``) weights it by ``trust()``: 1 until
``TRUST_POINTS`` configs are measured, then its rank agreement with the measurements, clipped
at 0 (``top_veto``: 0 while the prior misorders the better half of what was measured,
``top_agreement()``; ``"mapped"``: only a prior whose source grid does not hold this one's).
``agreement()`` is reported either way. Warm-start configs from a space that differs (names,
grid) are measured as their nearest config here (``tuner.search.transfer.map_config``).
The service never runs this search alone with a prior: ``tuner.search.hedged`` pairs it with a
cold twin.

The constants (``feasibility``, ``failed_in_model``, ``explore_after``, ``diverse_tops``,
``pow2_features``, ``init``, ``alternatives_after``, ``alternatives``, ``climb_patience``) were
chosen held out among the candidates of ``benchmarks/search_runs.py``; measured:
``benchmarks/search_efficiency.py`` (README, "Search quality").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Sequence

import numpy as np

from search_spaces import Config
from search_spaces import Context
from search_spaces import SearchSpace
from search_spaces import canonical_json as _key
from tuner.search import agreement
from tuner.search import local
from tuner.search.candidates import TOP_K
from tuner.search.candidates import scored_pool
from tuner.search.candidates import valid_candidates
from tuner.search.design import InitialDesign
from tuner.search.design import index_matrix
from tuner.search.encoding import Encoder
from tuner.search.gp import GaussianProcess
from tuner.search.gp import expected_improvement
from tuner.search.gp import normal_scores
from tuner.search.gp import success_share
from tuner.search.proposer import Asked
from tuner.search.proposer import Told
from tuner.search.transfer import MeasuredPrior
from tuner.search.transfer import map_config

#: Weight of the standard deviation in the stalled search's upper-confidence-bound steps.
EXPLORE_KAPPA = 2.0
#: Configs this many parameters apart are in distinct basins (``diverse_tops``, a stalled
#: search's rotation).
DIVERSE_PARAMS = 3
#: Where local steps start (``diverse_tops``, ``tuner.search.local.tops``).
DIVERSE_TOPS = ("never", "stalled", "always", "mixed")
#: Power-of-two features (module docstring): none, in the models only, everywhere, or "auto".
POW2_FEATURES = ("off", "model", "everywhere", "auto")
#: What a stalled search does (module docstring).
ALTERNATIVES = ("elsewhere", "local", "climb")
#: Climb steps in a row without a better head before a stalled climb starts elsewhere.
CLIMB_PATIENCE = 2
#: Measured configs from which the prior's rank agreement is computed (before: full trust).
TRUST_POINTS = 4
#: Trust 0 while the prior's rank agreement over the better half of the measured configs is
#: not positive (``top_veto``): ``"never"``, ``"always"`` (candidate ``hedged+trust+clear90+veto``
#: of ``benchmarks/search_transfer.py``) or ``"mapped"``: only for a prior whose source grid does
#: not hold this space's (``MeasuredPrior.holds``; candidate ``hedged+trust+clear90+vetomap``).
TOP_VETO = "never"
TOP_VETOES = ("never", "always", "mapped")


class ModelSearch:
    """Ask/tell proposer over the valid configs of one problem (see the module docstring)."""

    def __init__(self, space: SearchSpace, ctx: Context, seed: int | None,
                 n_init: int = 7, init: str = "alternate-snap", fail_penalty: float = 0.0,
                 xi: float = 0.0, local_every: int = 2,
                 prior: Callable[[Config], float] | None = None,
                 warm_start: Sequence[Config] = (), local_top: int = 3,
                 widen_after: int = 10, feasibility: bool = True,
                 failed_in_model: bool = True, explore_after: int = 0,
                 prior_trust: bool = False, diverse_tops: str = "mixed",
                 pow2_features: str = "auto", alternatives_after: int = 10,
                 alternatives: str = "climb", climb_patience: int = CLIMB_PATIENCE,
                 top_veto: str = TOP_VETO) -> None:
        for name, value, allowed in (("diverse_tops", diverse_tops, DIVERSE_TOPS),
                                     ("pow2_features", pow2_features, POW2_FEATURES),
                                     ("alternatives", alternatives, ALTERNATIVES),
                                     ("top_veto", top_veto, TOP_VETOES)):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}")
        self.alternatives = alternatives
        self.pow2_features = pow2_features
        self.prior_trust = prior_trust
        self._vetoed = top_veto == "always" or (top_veto == "mapped" and isinstance(
            prior, MeasuredPrior) and not prior.holds(space))  # ``top_veto`` applies
        self.diverse_tops = diverse_tops
        self.local_top = local_top
        self.feasibility = feasibility
        self.failed_in_model = failed_in_model or not feasibility
        self.explore_after = explore_after
        self.widen_after = widen_after
        self.alternatives_after = alternatives_after
        self._turn = 0  # the parameter a stalled step turns to next
        self._climb = local.Climb(climb_patience)
        self.space = space
        self.warm_start = [dict(c) for c in warm_start]
        self.ctx = ctx
        self.rng = np.random.default_rng(seed)
        self.n_init = n_init
        self.init = init
        self.design = InitialDesign(init, n_init, self.rng,
                                    [len(list(p.values())) for p in space.params])
        self.fail_penalty = fail_penalty
        self.xi = xi
        self.local_every = local_every
        self.prior = prior
        self._prior = np.zeros(0)
        self._steps = 0
        self._rotation = 0
        self.encoder = Encoder(space, pow2=pow2_features != "off")
        self._candidates: list[Config] | None = None
        self._shared_from: ModelSearch | None = None  # adopt_candidates
        self._x = np.zeros((0, 0))  # the models' features
        self._plain_x = self._x  # the initial design's and the pool's (no power-of-two flags)
        self._index: dict[str, int] = {}
        self._rows: tuple[np.ndarray, list[int]] | None = None  # value indices, varied columns
        self.observed: dict[int, float | None] = {}  # candidate -> log fraction, None = failed
        self.pending: set[int] = set()
        self._numbers: dict[int, int] = {}  # trial number -> candidate
        self._next_number = 0
        optional = self.encoder.pow2_columns if pow2_features == "auto" else ()
        self._gp = GaussianProcess(optional)  # on log fraction: the global steps
        self._rank_gp = GaussianProcess(optional)  # on normal scores of ranks: the local steps

    # -- candidates -----------------------------------------------------------------------------
    def _ensure(self) -> list[Config]:
        if self._candidates is None:
            if self._shared_from is not None:  # another search's valid configs (one problem)
                self._candidates = self._shared_from._ensure()
                self._index, self._x = self._shared_from._index, self._shared_from._x
                self._plain_x = self._shared_from._plain_x
            else:
                self._candidates = valid_candidates(self.space, self.ctx, self.rng)
                self._index = {_key(c): i for i, c in enumerate(self._candidates)}
                self._x = self.encoder.encode_all(self._candidates)
                if self.pow2_features in ("model", "auto"):  # the same, less the flags
                    self._plain_x = np.delete(self._x, self.encoder.pow2_columns, axis=1)
                else:
                    self._plain_x = self._x
            if self.prior is not None:
                values = np.array([self.prior(c) for c in self._candidates], dtype=float)
                finite = np.isfinite(values)
                floor = values[finite].min() - 1.0 if finite.any() else 0.0
                self._prior = np.where(finite, values, floor)
            else:
                self._prior = np.zeros(len(self._candidates))
        return self._candidates

    def _value_rows(self) -> tuple[np.ndarray, list[int]]:
        """Every candidate's value indices (``index_matrix``) and its varied columns, once."""
        if self._rows is None:
            rows = index_matrix(self.space, self._ensure())
            self._rows = rows, local.varied_columns(rows)
        return self._rows

    def _index_of(self, config: Config) -> int | None:
        self._ensure()
        return self._index.get(_key(config))

    # -- the proposer protocol ------------------------------------------------------------------
    def rebuild(self, history: Sequence[Told]) -> None:
        for t in history:
            self._next_number = max(self._next_number, t.number + 1)
            idx = self._index_of(t.config)
            if idx is None:
                continue
            if t.final:
                self.observed[idx] = _log(t.fraction)
            else:
                self.pending.add(idx)
                self._numbers[t.number] = idx

    def adopt_candidates(self, other: ModelSearch) -> None:
        """Score the valid configs ``other`` enumerates (same problem; before proposing)."""
        self._shared_from = other

    def observe(self, config: Config, fraction: float | None) -> None:
        """A measured result of a config this search did not propose (another search's)."""
        idx = self._index_of(config)
        if idx is not None:
            self.observed[idx] = _log(fraction)

    def ask(self) -> Asked | None:
        candidates = self._ensure()
        taken = np.zeros(len(candidates), dtype=bool)
        taken[list(self.observed)] = True
        taken[list(self.pending)] = True
        free: list[int] = np.flatnonzero(~taken).tolist()  # ascending, as before
        if not free:
            return None
        idx = self._initial(free) if len(self.observed) + len(self.pending) < self.n_init \
            else self._guided(free)
        number = self._next_number
        self._next_number += 1
        self.pending.add(idx)
        self._numbers[number] = idx
        return Asked(number=number, config=dict(candidates[idx]))

    def tell(self, number: int, fraction: float | None) -> None:
        idx = self._numbers.pop(number, None)
        if idx is None:
            return
        self.pending.discard(idx)
        self.observed[idx] = _log(fraction)

    # -- phases -----------------------------------------------------------------------------------
    def trust(self) -> float:
        """How far the prior is believed, in [0, 1]: 1.0, or with ``prior_trust`` its
        ``agreement()`` clipped at 0 once TRUST_POINTS configs are measured (with
        ``top_veto``, 0 while ``top_agreement()`` is known and not positive)."""
        overall = self.agreement()
        if overall is None or not self.prior_trust:
            return 1.0
        top = self.top_agreement() if self._vetoed else None
        return 0.0 if top is not None and top <= 0.0 else max(0.0, overall)

    def drop_prior(self) -> None:
        """From now on a search without a prior; what it measured is kept."""
        self.prior, self._prior = None, np.zeros(len(self._prior))

    def agreement(self) -> float | None:
        """Spearman's rank correlation between the prior and the measured log fractions
        (failures below every success); ``None`` without a prior or before TRUST_POINTS."""
        return None if self.prior is None else \
            agreement.overall(self._prior, self.observed, TRUST_POINTS)

    def top_agreement(self) -> float | None:
        """The same over the better half of the successes; ``None`` without a prior or before
        2 × TRUST_POINTS successes (``agreement.better_half``)."""
        return None if self.prior is None else \
            agreement.better_half(self._prior, self.observed, 2 * TRUST_POINTS)

    def _initial(self, free: list[int]) -> int:
        for seed in [*self.warm_start, *self.space.seed_configs()]:
            idx = self._index.get(_key(seed))
            if idx is None:  # from a space that differs: its nearest config here
                mapped = map_config(seed, self.space)
                idx = self._index.get(_key(mapped)) if mapped is not None else None
            if idx is not None and idx in free:
                return idx
        taken = list(self.observed) + list(self.pending)
        pool = np.array(free)
        if self.prior is not None:  # the model's favourites first, spread among themselves
            scores = self._prior[pool]
            if not taken:
                return int(pool[int(np.argmax(scores))])
            pool = pool[scores >= np.quantile(scores, 0.9)]
        return self.design.pick(pool, taken, self._plain_x,
                                lambda: self._value_rows()[0],
                                spread_only=self.prior is not None)

    def _guided(self, free: list[int]) -> int:
        done = [i for i, y in self.observed.items() if y is not None]
        if len(done) < 2:
            return self._initial(free)
        ys = np.array([self.observed[i] for i in done], dtype=float)
        failed = [i for i, y in self.observed.items() if y is None]
        if not self.failed_in_model:  # failures go to the feasibility model only
            failed = []
        idx = done + failed
        y = np.concatenate([ys, np.full(len(failed), ys.min() - self.fail_penalty)])
        self._steps += 1
        stalled = self._since_best()
        stuck_here = bool(self.alternatives_after) and stalled >= self.alternatives_after
        if self.local_every and self._steps % self.local_every == 0:
            order = [done[i] for i in np.argsort(-ys)]
            stuck = bool(self.explore_after) and stalled >= self.explore_after
            tops = local.tops(self._ensure(), order, self.diverse_tops, self.local_top,
                              stalled >= self.widen_after, DIVERSE_PARAMS)
            if stuck_here and self.alternatives == "local":
                # Stalled: refine from the best config of another value of one parameter, the
                # parameters in turn (``tuner.search.local.alternative``).
                other = local.alternative(self.space, self._ensure(), order, self._turn)
                self._turn += 1
                tops = [other] if other is not None else tops
            if stuck:  # refine around one basin after another: the best config of each
                basins = local.basins(self._ensure(), order, DIVERSE_PARAMS)
                self._rotation += 1
                tops = [basins[self._rotation % len(basins)]]
            free_set = set(free)
            near = np.zeros(0, dtype=int)
            climbing = False
            if stuck_here and self.alternatives != "local":  # the best's neighbours left
                near = self._moves(order[0], free_set, 1)
                if not len(near) and self.alternatives == "climb":
                    near = self._climb.start(self.space, self._ensure(), self.observed, order,
                                             lambda i: self._moves(i, free_set, 1))
                    climbing = bool(len(near))
            if not len(near):
                moves = [self._moves(t, free_set, 1) for t in tops]
                if self.widen_after and stalled >= self.widen_after:
                    moves.append(self._moves(tops[0], free_set, 2))  # stuck: two at a time
                near = np.unique(np.concatenate(moves))
            if len(near):
                # Ranks, not log fractions: among near-optimal configs the differences that
                # matter are far smaller than the log model's noise term.
                # (The prior, in log-fraction units, plays no part here.)
                scores = normal_scores(y)
                self._fit(self._rank_gp, idx, scores)
                mean, std = self._rank_gp.predict(self._x[near])
                ei = expected_improvement(mean, std, float(scores[:len(done)].max()), self.xi)
                choice = int(near[int(np.argmax(ei * self._feasible(near, self._rank_gp)))])
                if climbing:
                    self._climb.last = choice
                return choice
        weight = self.trust()  # the GP models what the prior gets wrong (zero without one)
        y = y - weight * self._prior[idx]
        self._fit(self._gp, idx, y)
        pool = scored_pool(np.array(free), [done[i] for i in np.argsort(-ys)[:TOP_K]],
                           self._plain_x, self.rng)
        if stuck_here and self.alternatives != "local":  # one parameter's other values
            self._turn += 1
            rows, varied = self._value_rows()
            there = local.elsewhere(rows, varied, done[int(np.argmax(ys))], pool, self._turn)
            pool = there if len(there) else pool
        mean, std = self._gp.predict(self._x[pool])
        mean = mean + weight * self._prior[pool]
        feasible = self._feasible(pool, self._gp)
        if self.explore_after and stalled >= self.explore_after:
            # Stuck: an upper confidence bound (log units) instead of EI sends the step where
            # the model knows least among the configs that could still be good (another basin).
            score = mean + EXPLORE_KAPPA * std + np.log(feasible)
        else:
            score = expected_improvement(mean, std, float(ys.max()), self.xi) * feasible
        return int(pool[int(np.argmax(score))])

    def _feasible(self, pool: np.ndarray, gp: GaussianProcess) -> np.ndarray:
        """Estimated probability that each of ``pool`` runs (1.0 when the feasibility model is
        off or nothing has failed): the kernel-weighted share of successes among the measured
        configs, under the regression GP's length scales, with one pseudo-success and one
        pseudo-failure (Laplace smoothing), so a config far from every failure keeps ~1."""
        measured = list(self.observed)
        ok = np.array([self.observed[i] is not None for i in measured], dtype=bool)
        if not self.feasibility or ok.all() or gp.lengths is None:
            return np.ones(len(pool))
        return success_share(self._x[pool], self._x[measured], ok, gp.lengths)

    def _fit(self, gp: GaussianProcess, idx: list[int], y: np.ndarray) -> None:
        """Fit ``gp`` to the measured candidates ``idx`` (targets ``y``), the configs in
        flight at their predicted value (``GaussianProcess.fit_believing``)."""
        gp.fit_believing(self._x[idx], y, self._x[sorted(self.pending)])

    def _moves(self, idx: int, free: set[int], depth: int) -> np.ndarray:
        """Unmeasured valid configs that differ from candidate ``idx`` in exactly ``depth``
        parameters (``tuner.search.local.moves``)."""
        return local.moves(self.space, self._ensure(), self._index, idx, free, depth)

    def _since_best(self) -> int:
        """Measurements finished since the best one so far (0: the last one is the best)."""
        values = [-math.inf if y is None else y for y in self.observed.values()]
        return len(values) - 1 - int(np.argmax(values))


def _log(fraction: float | None) -> float | None:
    if fraction is None or not math.isfinite(fraction) or fraction <= 0:
        return None
    return math.log(fraction)

