"""The Triton matmul, run by Triton's interpreter on the CPU, against its torch reference."""

from __future__ import annotations

import pytest
import torch

from tuner.kernels import load_kernel
from tuner.measure.bench import relative_error

MATMUL = load_kernel("matmul")


def _config(bm=32, bn=32, bk=16, group=4, warps=4, stages=2):
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group, "num_warps": warps,
            "num_stages": stages}


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize(("m", "n", "k"), [
    (1, 1, 1),  # tiny
    (37, 53, 29),  # no dimension a multiple of the block
    (256, 8, 40),  # tall-skinny
    (5, 130, 70),  # short-wide, K spans several blocks with a tail
])
def test_matmul_matches_reference(dtype, m, n, k):
    problem = {"M": m, "N": n, "K": k}
    tensors = MATMUL.make_inputs(problem, dtype, 1, "cpu")
    tensors["c"].fill_(float("nan"))
    MATMUL.launch(tensors, problem, _config())
    err = relative_error(tensors["c"], MATMUL.reference(tensors, problem))
    assert err <= MATMUL.tolerance[dtype], f"{dtype} {problem}: error {err:.2e}"


def test_grouped_ordering_and_large_tiles_agree():
    problem = {"M": 96, "N": 80, "K": 48}
    results = []
    for config in (_config(16, 16, 16, group=1), _config(64, 32, 32, group=8, warps=8),
                   _config(128, 128, 64, group=2)):
        tensors = MATMUL.make_inputs(problem, "fp32", 3, "cpu")
        MATMUL.launch(tensors, problem, config)
        results.append(tensors["c"].clone())
    assert torch.allclose(results[0], results[1], atol=1e-5)
    assert torch.allclose(results[0], results[2], atol=1e-5)


def test_inputs_are_seeded_random_not_zeros():
    problem = {"M": 8, "N": 8, "K": 8}
    a1 = MATMUL.make_inputs(problem, "bf16", 7, "cpu")["a"]
    a2 = MATMUL.make_inputs(problem, "bf16", 7, "cpu")["a"]
    a3 = MATMUL.make_inputs(problem, "bf16", 8, "cpu")["a"]
    assert torch.equal(a1, a2) and not torch.equal(a1, a3)
    assert a1.abs().sum() > 0 and a1.dtype == torch.bfloat16


def test_flops_and_bytes_by_hand():
    problem = {"M": 64, "N": 32, "K": 16}
    assert MATMUL.flops(problem, "fp16") == 2 * 64 * 32 * 16 == 65536
    # fp16: 2 bytes x (A 64x16 + B 16x32 + C 64x32) = 2 x (1024 + 512 + 2048) = 7168
    assert MATMUL.min_bytes(problem, "fp16") == 7168
    assert MATMUL.min_bytes(problem, "fp32") == 14336


def test_problem_and_dtype_validation():
    assert MATMUL.problem_errors({"M": 1, "N": 1, "K": 1}) == []
    assert "M must be positive, got 0" in MATMUL.problem_errors({"M": 0, "N": 1, "K": 1})
    assert any("missing" in e for e in MATMUL.problem_errors({"M": 1, "N": 1}))
    assert any("unknown dimension" in e for e in MATMUL.problem_errors(
        {"M": 1, "N": 1, "K": 1, "Q": 2}))
    assert any("elements" in e for e in MATMUL.problem_errors(
        {"M": 1 << 20, "N": 1 << 20, "K": 1}))
    assert MATMUL.dtype_errors("int8")
