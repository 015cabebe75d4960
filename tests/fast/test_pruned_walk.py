"""The pruned walk behind ``SearchSpace.valid_configs`` (``search_spaces.pruned``): exactly the
configs of the grid that pass every constraint, in the grid's order, on the built-in spaces
(conditional parameters included); a predicate's own ``except Exception`` or ``except
BaseException`` cannot hide a read of an unassigned parameter; the deadline; and the search's
candidates on a huge grid with few valid configs."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import pytest

from search_spaces import Context
from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from search_spaces.constraints import Constraint
from search_spaces.constraints import register
from search_spaces.pruned import WalkExpired
from tuner.kernels.registry import resolve_kernel
from tuner.search import candidates
from tuner.search.candidates import valid_candidates

CHAIN = "linear+bias+gelu+residual+layernorm"


def _plain(space: SearchSpace, ctx: Context) -> list[dict[str, Any]]:
    """Every point of the grid checked against every constraint: the walk's reference."""
    return [c for c in space.configs() if all(k.check(c, ctx) for k in space.constraints)]


def _narrowed(space: SearchSpace) -> SearchSpace:
    """The space with each power-of-two parameter cut to its two smallest values (the plain
    enumeration of the whole chain space would take minutes)."""
    params = tuple(dataclasses.replace(p, high=min(p.high, p.low * 2))
                   if isinstance(p, PowerOfTwo) else p for p in space.params)
    return dataclasses.replace(space, params=params)


def test_the_walk_finds_exactly_the_valid_configs_in_enumeration_order():
    cases = [("matmul", {"M": 64, "N": 64, "K": 64}), ("matmul", {"M": 4096, "N": 16, "K": 512}),
             ("rmsnorm", {"M": 8, "N": 200}), ("softmax", {"M": 64, "N": 5000})]
    for kernel, problem in cases:
        space = resolve_kernel(kernel, "interpret").space
        ctx = Context(problem, "fp16")
        assert list(space.valid_configs(ctx)) == _plain(space, ctx)
    chain = _narrowed(resolve_kernel(CHAIN, "interpret").space)
    assert any(p.when for p in chain.params) and chain.size() < 50_000
    for problem in ({"M": 16, "N": 32, "K": 16}, {"M": 256, "N": 32, "K": 128}):
        ctx = Context(problem, "fp16")
        expected = _plain(chain, ctx)
        assert expected and list(chain.valid_configs(ctx)) == expected


@register("test_pruned_swallows_errors", "test: b above a, errors read as invalid")
def _careless(config: Any, ctx: Context) -> bool:
    try:
        return bool(config["b"] > config["a"])
    except Exception:  # the walk's "not assigned yet" must not land here
        return False


@register("test_pruned_swallows_everything", "test: b above a, anything read as invalid")
def _reckless(config: Any, ctx: Context) -> bool:
    try:
        return bool(config["b"] > config["a"])
    except BaseException:  # the case under test
        return False


@pytest.mark.parametrize("predicate", ["test_pruned_swallows_errors",
                                       "test_pruned_swallows_everything"])
def test_a_predicate_that_swallows_exceptions_still_sees_every_completion(predicate):
    space = SearchSpace(name="careless", params=(PowerOfTwo("a", 1, 8), PowerOfTwo("b", 1, 8)),
                        constraints=(Constraint.of(predicate),))
    ctx = Context({"M": 1}, "fp32")
    found = list(space.valid_configs(ctx))
    assert found == _plain(space, ctx)
    assert len(found) == 6  # (1,2) (1,4) (1,8) (2,4) (2,8) (4,8)


def test_the_walk_stops_at_its_deadline_and_candidates_fall_back_to_a_sample(monkeypatch):
    space = resolve_kernel("matmul", "interpret").space
    ctx = Context({"M": 64, "N": 64, "K": 64}, "fp16")
    with pytest.raises(WalkExpired):
        next(space.valid_configs(ctx, deadline=time.monotonic() - 1))
    assert next(space.valid_configs(ctx, deadline=time.monotonic() + 60)) == _plain(space, ctx)[0]

    big = Context({"M": 8192, "N": 256, "K": 4096}, "fp16")
    every = _plain(space, big)
    limit = -(-len(every) // 4)  # the walk may keep every valid config (at most 4 * limit)
    assert space.size() > 4 * limit
    monkeypatch.setattr(candidates, "WALK_SECONDS", 0.0)
    sampled = candidates.valid_candidates(space, big, np.random.default_rng(0), limit=limit)
    assert sampled and all(space.is_valid(c, big) for c in sampled)
    monkeypatch.setattr(candidates, "WALK_SECONDS", 60.0)
    walked = candidates.valid_candidates(space, big, np.random.default_rng(0), limit=limit)
    assert len(walked) == limit and walked == [c for c in every if c in walked]
    assert sampled != walked


def test_a_huge_grid_with_few_valid_configs_gives_the_search_all_of_them():
    """The fused chain on a small problem: 27 million points, a few thousand valid. Sampling
    the grid found 93 of them in half a minute; the walk finds every one."""
    space = resolve_kernel(CHAIN, "interpret").space
    ctx = Context({"M": 16, "N": 32, "K": 16}, "fp16")
    start = time.monotonic()
    candidates = valid_candidates(space, ctx, np.random.default_rng(0))
    assert time.monotonic() - start < 30  # a generous bound: a hang, not a timing claim
    walked = list(space.valid_configs(ctx))
    assert space.size() > 10**7 and len(walked) > 1000
    assert candidates == walked and all(space.is_valid(c, ctx) for c in candidates[::50])


def test_the_valid_configs_of_a_huge_grid_are_counted_when_few(monkeypatch):
    """The driver stops a problem once every valid config is measured; it needs the count.
    The walk's deadline is lifted to 30 s (a hang bound: on a loaded machine the first count
    took over the usual second and came back ``None``) and checked on its own at 0 s; the
    second problem has more than COUNT_MOST valid configs."""
    chain = resolve_kernel(CHAIN, "interpret").space
    few = Context({"M": 16, "N": 32, "K": 16}, "fp16")
    monkeypatch.setattr(candidates, "COUNT_SECONDS", 30.0)
    assert candidates.count_valid(chain, few) == 3765
    assert candidates.count_valid(chain, Context({"M": 24, "N": 40, "K": 20}, "fp16")) is None
    monkeypatch.setattr(candidates, "COUNT_SECONDS", 0.0)
    assert candidates.count_valid(chain, few) is None  # past its deadline
    matmul = resolve_kernel("matmul", "interpret").space
    ctx = Context({"M": 64, "N": 64, "K": 64}, "fp16")
    assert candidates.count_valid(matmul, ctx) == len(_plain(matmul, ctx))
