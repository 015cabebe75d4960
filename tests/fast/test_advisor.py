"""Profile-first arithmetic: operator costs, the roofline answer, fusion chains and the plan,
checked against hand counts."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch.profiler import ProfilerActivity
from torch.profiler import profile

from tuner.advisor.fusion import Call
from tuner.advisor.fusion import find_chains
from tuner.advisor.op_costs import op_cost
from tuner.advisor.plan import make_plan
from tuner.advisor.plan import operator_job
from tuner.advisor.profile import summarise
from tuner.advisor.roofline_view import compute_bound_tokens
from tuner.advisor.roofline_view import roofline_answer
from tuner.core.devices.datasheets import device_spec


def test_linear_costs_match_hand_counts():
    cost = op_cost("aten::linear", [[32, 64], [256, 64], [256]], ["float"] * 3)
    assert cost is not None and cost.out_shape == (32, 256)
    assert cost.flops == 2 * 32 * 256 * 64 + 32 * 256  # multiply-adds plus the bias
    assert cost.min_bytes == 4 * (32 * 64 + 256 * 64 + 256 + 32 * 256)
    bf16 = op_cost("aten::mm", [[8, 16], [16, 4]], ["c10::BFloat16"] * 2)
    assert bf16 is not None and bf16.compute_dtype == "bf16"
    assert (bf16.flops, bf16.min_bytes) == (2 * 8 * 4 * 16, 2 * (8 * 16 + 16 * 4 + 8 * 4))


def test_matmul_flops_agree_with_the_profiler():
    x, w, b = torch.randn(32, 64), torch.randn(256, 64), torch.randn(256)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as p:
        torch.nn.functional.linear(x, w, b)
    (addmm,) = [e for e in p.events() if e.name == "aten::addmm"]
    ours = op_cost("aten::addmm", addmm.input_shapes, addmm.input_dtypes)
    assert ours is not None and ours.flops - 32 * 256 == addmm.flops  # the profiler skips bias


def test_memory_bound_operator_costs():
    softmax = op_cost("aten::softmax", [[8, 100], [], []], ["c10::Half", "Scalar", ""])
    assert softmax is not None
    assert (softmax.flops, softmax.min_bytes) == (5 * 800, 2 * 800 * 2)
    norm = op_cost("aten::layer_norm", [[8, 100], [], [100], [100], [], []],
                   ["float", "", "float", "float", "Scalar", "Scalar"])
    assert norm is not None and norm.min_bytes == 4 * (2 * 800 + 2 * 100)
    add = op_cost("aten::add", [[8, 100], [100], []], ["float", "float", "Scalar"])
    assert add is not None and add.out_shape == (8, 100)  # broadcast
    assert add.min_bytes == 4 * (800 + 100 + 800)
    sdpa = op_cost("aten::scaled_dot_product_attention", [[2, 4, 128, 64]] * 3, ["float"] * 3)
    assert sdpa is not None and sdpa.flops == 4 * 2 * 4 * 128 * 128 * 64
    assert op_cost("aten::t", [[4, 4]], ["float"]) is not None  # a view: free
    assert op_cost("aten::uniform_", [[4, 4], [], [], []], ["float", "", "", ""]) is None


def test_roofline_answer_hand_case():
    # 1 TFLOP and 1 GB of bf16 on an H100 SXM: 1.011 ms of compute, 0.2985 ms of memory.
    a = roofline_answer(1e12, 1e9, "bf16", "h100-sxm", measured_ms=2.0)
    assert a.bound == "compute"
    assert a.roof_ms == pytest.approx(1e12 / 989e12 * 1e3)
    assert a.memory_ms == pytest.approx(1e9 / 3350e9 * 1e3)
    assert a.intensity == 1000 and a.ridge == pytest.approx(989e12 / 3350e9)
    assert a.fraction == pytest.approx(a.roof_ms / 2.0)
    assert a.headroom_ms == pytest.approx(2.0 - a.roof_ms)
    with pytest.raises(ValueError, match="unknown device kind"):
        roofline_answer(1.0, 1.0, "bf16", "tpu")


def test_a_transformer_matmul_on_h100_needs_about_300_tokens():
    ridge = 989e12 / 3350e9  # 295 FLOP/B
    tokens = compute_bound_tokens(4096, 4096, "bf16", "h100-sxm")
    assert tokens == pytest.approx(ridge * 2 * 4096 * 4096 / (2 * 4096 * 4096
                                                              - ridge * 2 * 8192))
    assert 280 <= compute_bound_tokens(16384, 16384, "bf16", "h100-sxm") <= 310
    # Above the ridge the intensity exceeds it, below it does not.
    m = math.ceil(tokens)
    assert 2 * m * 4096 * 4096 / (2 * (m * 4096 * 2 + 4096 * 4096)) >= ridge


def _calls() -> list[Call]:
    f = ["float", "float", "float"]
    return [
        Call("aten::linear", [[64, 32], [128, 32], [128]], f, 4.0),
        Call("aten::gelu", [[64, 128], []], ["float", ""], 2.0),
        Call("aten::linear", [[64, 128], [32, 128], [32]], f, 3.0),
        Call("aten::add", [[64, 32], [64, 32], []], ["float", "float", "Scalar"], 1.0),
        Call("aten::layer_norm", [[64, 32], [], [32], [32], [], []],
             ["float", "", "float", "float", "Scalar", "Scalar"], 1.0),
        Call("aten::uniform_", [[8, 8], [], [], []], ["float", "", "", ""], 1.0),
    ]


def test_chains_and_what_fusing_them_saves():
    chains = find_chains(_calls(), device_spec("h100-sxm"))
    by_ops = {tuple(c.ops): c for c in chains}
    up = by_ops[("aten::linear", "aten::gelu")]
    assert up.saved_bytes == 2 * 64 * 128 * 4  # the 64×128 fp32 intermediate, out and back
    assert up.service_kernel == "matmul+bias+gelu" and up.problem == {"M": 64, "N": 128,
                                                                       "K": 32}
    down = by_ops[("aten::linear", "aten::add", "aten::layer_norm")]
    assert down.saved_bytes == 2 * (2 * 64 * 32 * 4)  # two intermediates
    assert down.service_kernel == "matmul+bias+residual"


def test_shares_sum_to_one_and_savings_are_bounded_by_time():
    p = summarise("prog", _calls(), wall_ms=20.0, device="cpu", device_kind="cpu",
                  peaks={"fp32": 0.1}, bandwidth_gbps=10.0, target_kind="h100-sxm")
    assert sum(g.share for g in p.groups) + p.outside_share == pytest.approx(1.0)
    assert p.outside_ms == pytest.approx(20.0 - 12.0)
    for g in p.groups:
        if g.saving_ms is not None:
            assert 0 <= g.saving_ms <= g.time_ms
    assert p.groups[0].time_ms == max(g.time_ms for g in p.groups)


def test_plan_splits_the_budget_by_gain_largest_first():
    p = summarise("prog", _calls(), wall_ms=20.0, device="cpu", device_kind="cpu",
                  peaks={"fp32": 0.1}, bandwidth_gbps=10.0, target_kind="h100-sxm")
    jobs = make_plan(p, total_trials=100, min_trials=5)
    assert sum(j.trials for j in jobs) == 100
    assert all(j.trials >= 5 for j in jobs)
    gains = [j.gain_ms for j in jobs]
    assert gains == sorted(gains, reverse=True)
    assert jobs[0].trials == max(j.trials for j in jobs)
    kernels = {j.kernel for j in jobs}
    # both linears and the layer norm run inside chains: the chains' jobs account for them
    assert kernels == {"matmul+bias+gelu", "matmul+bias+residual"}
    with pytest.raises(ValueError):
        make_plan(p, total_trials=0)


def test_plan_counts_each_operator_call_once():
    p = summarise("prog", _calls(), wall_ms=20.0, device="cpu", device_kind="cpu",
                  peaks={"fp32": 0.1}, bandwidth_gbps=10.0, target_kind="h100-sxm")
    jobs = make_plan(p, total_trials=100, min_trials=5)
    assert sum(j.gain_share for j in jobs) <= 1.0
    assert sum(j.gain_ms for j in jobs) <= p.wall_ms
    chained = {(op, json.dumps(shapes)) for c in p.chains if c.service_kernel
               for op, shapes in zip(c.ops, c.shapes, strict=True)}
    for j in jobs:  # an operator job keeps only calls that no chain job covers
        if j.source == "operator":
            op = j.detail.split(" ×")[0]
            group = next(g for g in p.groups if g.op == op and
                         operator_job(g) == (j.kernel, j.problem))
            assert (op, json.dumps(group.shapes)) not in chained or "in chains" in j.detail
    # the layer norm of the down-projection chain is not also a job of its own
    assert not any(j.kernel == "layernorm" and j.source == "operator" and
                   j.problem == {"M": 64, "N": 32} for j in jobs)
