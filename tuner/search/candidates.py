"""The valid configs a search chooses among: every one when the space is small or its valid
configs few enough for the pruned walk (``SearchSpace.valid_configs``) to find them all in a
few seconds, else a uniform sample of the space filtered by the constraints."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import numpy as np

from search_spaces import Config
from search_spaces import Context
from search_spaces import SearchSpace
from search_spaces import canonical_json
from search_spaces.pruned import WalkExpired

MAX_CANDIDATES = 50_000
#: A space too large to enumerate is sampled (up to MAX_CANDIDATES valid configs from 20 times
#: as many random points); sampling stops early after SAMPLE_SECONDS once it holds
#: ENOUGH_CANDIDATES valid configs.
SAMPLE_SECONDS = 2.0
ENOUGH_CANDIDATES = 500
#: Wall seconds the pruned walk may take before the space is sampled instead.
WALK_SECONDS = 3.0
#: Candidates the model scores per proposal when there are more (``scored_pool``): a uniform
#: sample plus the NEIGHBOURS nearest to each of the TOP_K best measured configs.
MAX_SCORED = 4000
TOP_K = 5
NEIGHBOURS = 100
#: ``count_valid`` counts every valid config of a grid of at most COUNT_ALL_POINTS points; on
#: a larger grid it gives up past COUNT_SECONDS or COUNT_MOST valid configs.
COUNT_ALL_POINTS = 200_000
COUNT_SECONDS = 1.0
COUNT_MOST = 50_000


def count_valid(space: SearchSpace, ctx: Context) -> int | None:
    """How many valid configs ``space`` has for ``ctx``, or ``None`` when the grid is larger
    than COUNT_ALL_POINTS and the pruned walk needs more than COUNT_SECONDS (wall) or finds
    more than COUNT_MOST valid configs (a search budget never measures them all)."""
    if space.size() <= COUNT_ALL_POINTS:
        return sum(1 for _ in space.valid_configs(ctx))
    walked = _walked(space, ctx, COUNT_MOST, COUNT_SECONDS)
    return None if walked is None else len(walked)


def valid_candidates(space: SearchSpace, ctx: Context, rng: np.random.Generator,
                     limit: int = MAX_CANDIDATES) -> list[Config]:
    """The valid configs for ``ctx``, at most ``limit``: on a grid of at most ``4 * limit``
    points every one, and on a larger grid every one if the pruned walk finds at most
    ``4 * limit`` within WALK_SECONDS (a random ``limit`` of them if there are more than
    ``limit``); else a uniform sample of the grid filtered by the constraints (see
    ``SAMPLE_SECONDS``), valid seeds included."""
    configs = _walked(space, ctx, limit * 4, WALK_SECONDS)
    if configs is not None:
        if len(configs) <= limit:
            return configs
        picks = rng.choice(len(configs), limit, replace=False)
        return [configs[i] for i in sorted(picks)]
    found: dict[str, Config] = {canonical_json(s): s for s in space.seed_configs()
                                if space.is_valid(s, ctx)}
    start = time.monotonic()
    for tries, config in enumerate(_random_points(space, rng, limit * 20), start=1):
        if space.is_valid(config, ctx):
            found.setdefault(canonical_json(config), config)
            if len(found) >= limit:
                break
        if tries % 1000 == 0 and len(found) >= ENOUGH_CANDIDATES \
                and time.monotonic() - start > SAMPLE_SECONDS:
            break  # constraints are slow to check here: this sample is enough to search
    return list(found.values())


def _walked(space: SearchSpace, ctx: Context, most: int, seconds: float) -> list[Config] | None:
    """Every valid config, or ``None`` when there are more than ``most`` of them, or when the
    grid has more than ``most`` points and the walk takes more than ``seconds`` (wall)."""
    deadline = None if space.size() <= most else time.monotonic() + seconds
    try:
        configs = list(itertools.islice(space.valid_configs(ctx, deadline), most + 1))
    except WalkExpired:
        return None
    return configs if len(configs) <= most else None


def _random_points(space: SearchSpace, rng: np.random.Generator, n: int) -> Iterator[Config]:
    for _ in range(n):
        config: Config = {}
        for p in space.params:
            if p.active(config):
                values = p.values()
                config[p.name] = values[int(rng.integers(len(values)))]
        yield config


def scored_pool(free: np.ndarray, best: list[int], features: np.ndarray,
                rng: np.random.Generator) -> np.ndarray:
    """The candidates the model scores this step (indices): every one of ``free`` when there
    are at most MAX_SCORED; else a uniform sample plus the NEIGHBOURS nearest (Euclidean, in
    ``features``) to each of the ``best`` measured candidates (at most TOP_K)."""
    if len(free) <= MAX_SCORED:
        return free
    sample = rng.choice(free, MAX_SCORED - TOP_K * NEIGHBOURS, replace=False)
    free_x = features[free]  # one copy for every best config
    near = []
    for i in best:
        dist = ((free_x - features[i]) ** 2).sum(1)
        near.append(free[np.argsort(dist)[:NEIGHBOURS]])
    return np.unique(np.concatenate([sample, *near]))
