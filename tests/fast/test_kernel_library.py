"""The kernel library on Triton's interpreter: every kernel and grouping against its torch
reference across dtypes and awkward shapes, and its FLOPs and bytes against hand counts."""

from __future__ import annotations

import pytest
import torch

from search_spaces import Categorical
from search_spaces import Context
from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from search_spaces import when
from tuner.core.roofline import roof
from tuner.kernels import KernelError
from tuner.kernels import load_kernel
from tuner.kernels.names import parse_epilogue
from tuner.measure.bench import relative_error

ROW_SHAPES = [
    {"M": 1, "N": 1},  # tiny
    {"M": 5, "N": 37},  # N not a multiple of any block
    {"M": 3, "N": 300},  # a row longer than the block: the two-pass path
    {"M": 130, "N": 16},  # tall-skinny
]
MATMUL_SHAPES = [{"M": 1, "N": 1, "K": 1}, {"M": 37, "N": 53, "K": 29},
                 {"M": 130, "N": 20, "K": 70}]
MM = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 4, "num_warps": 4,
      "num_stages": 2}


def _check(name: str, problem: dict[str, int], dtype: str, config: dict[str, object]) -> None:
    spec = load_kernel(name)
    tensors = spec.make_inputs(problem, dtype, 1, "cpu")
    tensors[spec.output].fill_(float("nan"))
    spec.launch(tensors, problem, config)
    err = relative_error(tensors[spec.output], spec.reference(tensors, problem))
    assert err <= spec.tolerance[dtype], f"{name} {dtype} {problem} {config}: error {err:.2e}"


@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("problem", ROW_SHAPES)
def test_rowwise_kernels_match_reference(name, dtype, problem):
    _check(name, problem, dtype, {"BLOCK_N": 64, "num_warps": 2})


@pytest.mark.parametrize("name", ["matmul+bias+gelu+residual", "matmul+relu", "matmul+bias+silu",
                                  "matmul+residual"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("problem", MATMUL_SHAPES)
def test_matmul_epilogues_match_reference(name, dtype, problem):
    _check(name, problem, dtype, MM)


@pytest.mark.parametrize("problem", MATMUL_SHAPES)
def test_fp8_matmul_matches_reference(problem):
    _check("matmul", problem, "fp8e4m3", MM)
    assert load_kernel("matmul").make_inputs(problem, "fp8e4m3", 0, "cpu")["c"].dtype \
        == torch.float16


@pytest.mark.parametrize("name", ["attention", "attention_causal"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize(("problem", "config"), [
    ({"Z": 1, "H": 2, "S": 37, "D": 16}, {"BLOCK_M": 16, "BLOCK_N": 16}),
    ({"Z": 2, "H": 1, "S": 100, "D": 64}, {"BLOCK_M": 32, "BLOCK_N": 16}),  # S % block ≠ 0
    ({"Z": 1, "H": 1, "S": 70, "D": 128}, {"BLOCK_M": 16, "BLOCK_N": 32}),  # BLOCK_N > BLOCK_M
    ({"Z": 1, "H": 1, "S": 1, "D": 64}, {"BLOCK_M": 16, "BLOCK_N": 16}),  # one token
])
def test_attention_matches_reference(name, dtype, problem, config):
    _check(name, problem, dtype, {**config, "num_warps": 1, "num_stages": 2})


CHAIN = "linear+bias+gelu+residual+layernorm"
_SPLIT = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 4, "num_warps": 2,
          "num_stages": 2, "LN_BLOCK_N": 16, "LN_WARPS": 1}  # LN rows > 16: two passes
GROUPING_CONFIGS = {
    "full": {"grouping": "full", "BLOCK_M": 16, "BLOCK_K": 16, "num_warps": 2, "num_stages": 2},
    "epilogue": {"grouping": "epilogue", **_SPLIT},
    "separate": {"grouping": "separate", **_SPLIT, "EW_BLOCK": 256, "EW_WARPS": 2},
    "unfused": {"grouping": "unfused", **_SPLIT, "EW_BLOCK": 256, "EW_WARPS": 2},
}


MOE = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 16,
       "num_warps": 4, "num_stages": 2}


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("problem", [
    {"M": 1, "E": 4, "N": 32, "K": 64, "topk": 1},
    {"M": 5, "E": 3, "N": 40, "K": 70, "topk": 2},  # N and K off every block, experts shared
    {"M": 33, "E": 8, "N": 64, "K": 64, "topk": 8},  # every token to every expert
])
def test_fused_moe_matches_reference(dtype, problem):
    _check("fused_moe", problem, dtype, MOE)
    _check("fused_moe", problem, dtype, {**MOE, "BLOCK_SIZE_M": 64, "GROUP_SIZE_M": 1})


@pytest.mark.parametrize("grouping", list(GROUPING_CONFIGS))
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("problem", MATMUL_SHAPES)
def test_every_grouping_of_the_chain_matches_reference(grouping, dtype, problem):
    config = GROUPING_CONFIGS[grouping]
    assert load_kernel(CHAIN).space.is_valid(config, Context(problem, dtype))
    _check(CHAIN, problem, dtype, config)


def test_chain_space_is_conditional_on_the_grouping():
    space = load_kernel(CHAIN).space
    wide = Context({"M": 512, "N": 1024, "K": 512}, "fp16")
    full = GROUPING_CONFIGS["full"]
    assert space.domain_errors(full) == []
    assert not space.is_valid(full, wide)  # a 1024-wide row does not fit one tile
    assert space.is_valid(full, Context({"M": 512, "N": 256, "K": 512}, "fp16"))
    # Parameters of another grouping are not part of a config.
    assert space.domain_errors({**full, "EW_BLOCK": 256}) != []
    # The size counts each grouping's own parameters only: 500 + 550,000 + 2 × 13,200,000.
    assert space.size() == 500 + 550_000 + 2 * 13_200_000


def test_size_of_a_conditional_space_equals_its_enumeration():
    space = SearchSpace("s", (Categorical("g", ("a", "b", "c")), PowerOfTwo("x", 1, 8),
                              PowerOfTwo("y", 1, 4, when=when(g=("a",))),
                              PowerOfTwo("z", 1, 2, when=when(g=("a", "b")))))
    assert space.size() == sum(1 for _ in space.configs()) == 4 * 3 * 2 + 4 * 2 + 4


# -- counts against hand computation ---------------------------------------------------------
def test_rowwise_counts():
    p = {"M": 10, "N": 100}
    softmax, layernorm, rmsnorm = (load_kernel(n) for n in ("softmax", "layernorm", "rmsnorm"))
    assert softmax.min_bytes(p, "fp16") == 2 * 1000 * 2  # read x, write y
    assert layernorm.min_bytes(p, "bf16") == 2 * 1000 * 2 + 2 * 100 * 2  # + weight and bias
    assert rmsnorm.min_bytes(p, "fp32") == 4 * 1000 * 2 + 4 * 100  # + weight
    assert (softmax.flops(p, "fp16"), layernorm.flops(p, "fp16"), rmsnorm.flops(p, "fp16")) \
        == (5000, 7000, 4000)


def test_epilogue_and_fp8_counts():
    p = {"M": 64, "N": 32, "K": 16}
    spec = load_kernel("matmul+bias+gelu+residual")
    assert spec.flops(p, "fp16") == 2 * 64 * 32 * 16 + 3 * 64 * 32
    # A, B, C as a matmul, plus the bias vector and the residual matrix.
    assert spec.min_bytes(p, "fp16") == 2 * (64 * 16 + 16 * 32 + 64 * 32) + 2 * 32 + 2 * 64 * 32
    # fp8 inputs (1 byte) write an fp16 C (2 bytes).
    assert load_kernel("matmul").min_bytes(p, "fp8e4m3") == 64 * 16 + 16 * 32 + 2 * 64 * 32


def test_attention_counts_and_exp_roof():
    p = {"Z": 2, "H": 4, "S": 128, "D": 64}
    dense, causal = load_kernel("attention"), load_kernel("attention_causal")
    assert dense.flops(p, "bf16") == 4 * 2 * 4 * 128 * 128 * 64
    assert causal.flops(p, "bf16") == dense.flops(p, "bf16") / 2
    assert dense.min_bytes(p, "bf16") == 2 * 4 * (2 * 4 * 128 * 64) + 4 * 2 * 4 * 128
    assert dense.exps is not None and causal.exps is not None
    assert dense.exps(p) == 2 * 4 * 128 * 128 and causal.exps(p) == dense.exps(p) / 2
    # exp-bound by construction: 1e12 exps at 1e12/s take 1000 ms, more than either other roof.
    r = roof(1e12, 1e9, 1000.0, 1000.0, exps=1e12, exp_per_s=1e12)
    assert r.bound == "exp" and r.roof_ms == pytest.approx(1000.0)


def test_h100_exp_rate_matches_the_anchor():
    from tuner.core.devices.datasheets import device_spec

    spec = device_spec("h100-sxm")
    assert spec is not None and spec.exp_per_s == pytest.approx(3.9e12, rel=0.01)


def test_chain_counts_are_the_fully_fused_ideal():
    p = {"M": 8, "N": 4, "K": 2}
    spec = load_kernel(CHAIN)
    assert spec.flops(p, "fp32") == 2 * 8 * 4 * 2 + 10 * 8 * 4
    # x, W, residual, y, and bias + LN weight + LN bias; no intermediate round trips.
    assert spec.min_bytes(p, "fp32") == 4 * (8 * 2 + 2 * 4 + 8 * 4 + 8 * 4 + 3 * 4)


# -- names and bad input ----------------------------------------------------------------------
def test_epilogue_names_parse_in_order_only():
    assert parse_epilogue("matmul+bias+gelu+residual") == (True, "gelu", True)
    assert parse_epilogue("matmul+silu") == (False, "silu", False)
    assert parse_epilogue("matmul+gelu+bias") is None
    assert parse_epilogue("matmul") is None
    with pytest.raises(KernelError, match="is not matmul"):
        load_kernel("matmul+tanh")


def test_attention_rejects_unsupported_head_dims():
    spec = load_kernel("attention")
    assert spec.problem_errors({"Z": 1, "H": 1, "S": 64, "D": 48}) == [
        "head dim D=48 is not supported (choose from 16, 32, 64, 128)"]
    assert spec.problem_errors({"Z": 1, "H": 1, "S": 64, "D": 128}) == []
