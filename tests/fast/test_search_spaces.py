"""Search spaces: parameter domains, constraints, JSON round-trip, stable hashes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from search_spaces import Categorical
from search_spaces import Choice
from search_spaces import Constraint
from search_spaces import Context
from search_spaces import IntRange
from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from search_spaces import TargetLimits
from search_spaces import when
from search_spaces.matmul import accumulator_regs_per_thread
from search_spaces.matmul import matmul_space
from search_spaces.matmul import pipeline_smem_bytes
from search_spaces.matmul import tutorial_configs
from tuner.core.devices.datasheets import target_limits


def test_parameter_domains():
    assert PowerOfTwo("B", 16, 256).values() == (16, 32, 64, 128, 256)
    assert IntRange("s", 1, 7, 3).values() == (1, 4, 7)
    assert Choice("g", (1, 4, 8)).values() == (1, 4, 8)
    assert Categorical("act", ("relu", "gelu")).values() == ("relu", "gelu")
    assert not Categorical("flag", (1, 2)).contains(True)
    assert Categorical("flag", (True, False)).contains(True)
    with pytest.raises(ValueError, match="not a power of two"):
        PowerOfTwo("B", 3, 8)
    with pytest.raises(ValueError, match="low 9 > high 8"):
        IntRange("s", 9, 8)
    with pytest.raises(ValueError, match="repeated"):
        Choice("g", (1, 1))


def _conditional_space() -> SearchSpace:
    return SearchSpace(name="cond", params=(
        Categorical("grouping", ("fused", "split")),
        PowerOfTwo("BLOCK", 16, 32),
        PowerOfTwo("LN_BLOCK", 64, 128, when=when(grouping=("split",))),
    ))


def test_every_parameter_type_round_trips_through_json():
    space = SearchSpace(
        name="all", params=(PowerOfTwo("a", 1, 8), IntRange("b", 0, 4, 2), Choice("c", (3, 5)),
                            Categorical("d", ("x", "y"), when=when(c=(5,)))),
        constraints=(Constraint.of("tile_fits_problem", dims=(("a", "N"),)),),
        seeds=SearchSpace.freeze_seeds([{"a": 1, "b": 0, "c": 3}]))
    again = SearchSpace.from_json(space.to_json())
    assert again == space
    assert again.space_hash() == space.space_hash()
    assert matmul_space() == SearchSpace.from_json(matmul_space().to_json())


def test_hash_is_stable_across_processes():
    code = "from search_spaces.matmul import matmul_space; print(matmul_space().space_hash())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert other == matmul_space().space_hash()
    changed = SearchSpace(name="matmul", params=matmul_space().params[:-1])
    assert changed.space_hash() != matmul_space().space_hash()


def test_conditional_parameters_enumerate_and_suggest():
    space = _conditional_space()
    configs = list(space.configs())
    # fused: 2 blocks; split: 2 blocks x 2 LN blocks
    assert len(configs) == 6 == space.size()
    assert {"grouping": "fused", "BLOCK": 16} in configs
    assert {"grouping": "split", "BLOCK": 32, "LN_BLOCK": 128} in configs

    class First:
        def suggest_categorical(self, name, choices):
            return choices[-1]

        def suggest_int(self, name, low, high, *, step=1, log=False):
            return low

    assert space.suggest(First()) == {"grouping": "split", "BLOCK": 32, "LN_BLOCK": 128}
    assert space.domain_errors({"grouping": "fused", "BLOCK": 16, "LN_BLOCK": 64}) == [
        "unknown parameter 'LN_BLOCK'"]
    with pytest.raises(ValueError, match="must be declared before"):
        SearchSpace(name="bad", params=(PowerOfTwo("x", 1, 2, when=when(y=(1,))),
                                        Choice("y", (1,))))


def test_unknown_constraint_is_refused():
    with pytest.raises(ValueError, match="unknown constraint"):
        Constraint.of("no_such_rule")


# -- the matmul space against docs/PERFORMANCE_FACTS.md §3 ------------------------------------
def _cfg(bm, bn, bk, stages, warps, group=8):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group,
            "num_warps": warps, "num_stages": stages}


def test_shared_memory_examples_from_the_performance_facts():
    # bf16: 128x256x64 fits at 4 stages (196,608 B) but not at 5 (245,760 B).
    assert pipeline_smem_bytes(_cfg(128, 256, 64, 4, 8), 2) == 196_608
    assert pipeline_smem_bytes(_cfg(128, 256, 64, 5, 8), 2) == 245_760
    h100 = Context({"M": 4096, "N": 4096, "K": 4096}, "bf16", target_limits("h100-sxm"))
    space = matmul_space()
    assert space.is_valid(_cfg(128, 256, 64, 4, 8), h100)
    assert any("matmul_smem_fits" in v for v in space.violations(_cfg(128, 256, 64, 5, 8), h100))
    # 128x128x128 and 256x256x64 fit at 3 stages but not at 4 (262,144 B)
    assert space.is_valid(_cfg(128, 128, 128, 3, 8), h100)
    assert not space.is_valid(_cfg(128, 128, 128, 4, 8), h100)
    assert not space.is_valid(_cfg(256, 256, 64, 4, 8), h100)
    # A100's opt-in limit is smaller: 128x256x64 at 4 stages no longer fits there
    a100 = Context(h100.problem, "bf16", target_limits("a100-80gb"))
    assert not space.is_valid(_cfg(128, 256, 64, 4, 8), a100)


def test_register_and_warp_constraints():
    assert accumulator_regs_per_thread(_cfg(256, 256, 32, 2, 4)) == 512
    h100 = Context({"M": 4096, "N": 4096, "K": 4096}, "fp16", target_limits("h100-sxm"))
    space = matmul_space()
    violations = space.violations(_cfg(128, 256, 32, 2, 4), h100)  # 256 per thread
    assert any("matmul_acc_regs" in v for v in violations)
    assert space.is_valid(_cfg(128, 256, 32, 2, 8), h100)  # 128 per thread
    # 256x256 accumulators alone fill the 65,536-register file, whatever the warps
    violations = space.violations(_cfg(256, 256, 32, 2, 16), h100)
    assert any("matmul_cta_regs" in v for v in violations)
    # 16x16 tile has work for at most 2 warps
    assert not space.is_valid(_cfg(16, 16, 16, 2, 4), h100)
    assert space.is_valid(_cfg(16, 16, 16, 2, 2), h100)


def test_tiles_no_larger_than_the_problem_needs():
    ctx = Context({"M": 100, "N": 16, "K": 40}, "fp32", target_limits("cpu"))
    space = matmul_space()
    assert space.is_valid(_cfg(128, 16, 64, 2, 4), ctx)  # next_pow2(100)=128, (40)=64
    assert not space.is_valid(_cfg(256, 16, 64, 2, 4), ctx)
    assert not space.is_valid(_cfg(128, 32, 64, 2, 4), ctx)
    assert not space.is_valid(_cfg(128, 16, 128, 2, 4), ctx)
    for config in space.valid_configs(ctx):
        assert config["BLOCK_M"] <= 128 and config["BLOCK_N"] == 16 and config["BLOCK_K"] <= 64


def test_cpu_target_has_no_hardware_limits_and_tutorial_seeds_are_defaults():
    cpu = Context({"M": 4096, "N": 4096, "K": 4096}, "fp32", target_limits("cpu"))
    assert cpu.target == TargetLimits(kind="cpu", max_threads_per_block=None)
    space = matmul_space()
    assert space.is_valid(_cfg(256, 256, 256, 5, 16), cpu)
    assert space.default_config(cpu) == tutorial_configs()[0]
    tiny = Context({"M": 16, "N": 16, "K": 16}, "fp16", target_limits("h100-sxm"))
    default = space.default_config(tiny)
    assert default is not None and space.is_valid(default, tiny)
    assert default["BLOCK_M"] == default["BLOCK_N"] == default["BLOCK_K"] == 16
