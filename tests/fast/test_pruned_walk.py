"""The pruned walk over a space's valid configs (``search_spaces.pruned``): exactly the valid
configs the plain enumeration finds, in its order, on the built-in spaces (conditional
parameters included); a predicate's own ``except Exception`` cannot hide a read of an unassigned
parameter; the caps; and the search's candidates on a huge grid with few valid configs."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from search_spaces import Context
from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from search_spaces.constraints import Constraint
from search_spaces.constraints import register
from search_spaces.pruned import pruned_valid_configs
from tuner.kernels.registry import resolve_kernel
from tuner.search.candidates import valid_candidates

CHAIN = "linear+bias+gelu+residual+layernorm"


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
        assert pruned_valid_configs(space, ctx, 10**6, 60.0) == list(space.valid_configs(ctx))
    chain = _narrowed(resolve_kernel(CHAIN, "interpret").space)
    assert any(p.when for p in chain.params) and chain.size() < 50_000
    for problem in ({"M": 16, "N": 32, "K": 16}, {"M": 256, "N": 32, "K": 128}):
        ctx = Context(problem, "fp16")
        expected = list(chain.valid_configs(ctx))
        assert expected and pruned_valid_configs(chain, ctx, 10**6, 60.0) == expected


@register("test_pruned_swallows_errors", "test: b above a, errors read as invalid")
def _careless(config: Any, ctx: Context) -> bool:
    try:
        return bool(config["b"] > config["a"])
    except Exception:  # the walk's "not assigned yet" must not land here
        return False


def test_a_predicate_that_swallows_exceptions_still_sees_every_completion():
    space = SearchSpace(name="careless", params=(PowerOfTwo("a", 1, 8), PowerOfTwo("b", 1, 8)),
                        constraints=(Constraint.of("test_pruned_swallows_errors"),))
    ctx = Context({"M": 1}, "fp32")
    found = pruned_valid_configs(space, ctx, 100, 60.0)
    assert found == list(space.valid_configs(ctx))
    assert found is not None and len(found) == 6  # (1,2) (1,4) (1,8) (2,4) (2,8) (4,8)


def test_the_walk_gives_up_past_its_configs_or_seconds():
    space = resolve_kernel("matmul", "interpret").space
    ctx = Context({"M": 64, "N": 64, "K": 64}, "fp16")
    total = len(list(space.valid_configs(ctx)))
    assert len(pruned_valid_configs(space, ctx, total, 60.0) or []) == total
    assert pruned_valid_configs(space, ctx, total - 1, 60.0) is None
    assert pruned_valid_configs(space, ctx, total, 0.0) is None


def test_a_huge_grid_with_few_valid_configs_gives_the_search_all_of_them():
    """The fused chain on a small problem: 27 million points, a few thousand valid. Sampling
    the grid found 93 of them in half a minute; the walk finds every one."""
    space = resolve_kernel(CHAIN, "interpret").space
    ctx = Context({"M": 16, "N": 32, "K": 16}, "fp16")
    start = time.monotonic()
    candidates = valid_candidates(space, ctx, np.random.default_rng(0))
    assert time.monotonic() - start < 30  # a generous bound: a hang, not a timing claim
    walked = pruned_valid_configs(space, ctx, 10**6, 60.0)
    assert space.size() > 10**7 and walked is not None and len(walked) > 1000
    assert candidates == walked and all(space.is_valid(c, ctx) for c in candidates[::50])
