"""FLOPs and minimum bytes of one PyTorch operator call, from its input shapes and dtypes.

What a perfect kernel must do (``docs/PERFORMANCE_FACTS.md`` §4): bytes = every input
read once plus the output written once; FLOPs = 2·(output elements)·K for matmuls (+ one per
output element for a bias), 4·batch·heads·Sq·Sk·D for attention, and for the rest one FLOP per
output element per arithmetic step (the counts of ``tuner/kernels``: softmax 5, layernorm 7,
rmsnorm 4). The matmul counts agree with the profiler's own (``with_flops``), which a test
checks.

``op_cost`` returns ``None`` for operators it has no formula for (they are shown as such, not
guessed), and for views and copies that move no data (``aten::t``, ``aten::view``…) a zero cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Bytes per element of the dtype names the profiler reports.
DTYPE_SIZES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "half": 2,
               "bfloat16": 2, "long int": 8, "int": 4, "bool": 1, "signed char": 1,
               "unsigned char": 1, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1}
#: Profiler dtype name → the compute dtype whose peak applies.
COMPUTE_DTYPES = {"float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16",
                  "c10::Float8_e4m3fn": "fp8e4m3", "double": "fp32"}
#: FLOPs per output element of elementwise and row-wise operators.
ELEMENTWISE_FLOPS = {
    "aten::add": 1, "aten::sub": 1, "aten::mul": 1, "aten::div": 1, "aten::relu": 1,
    "aten::gelu": 1, "aten::silu": 1, "aten::sigmoid": 1, "aten::tanh": 1, "aten::neg": 1,
    "aten::exp": 1, "aten::rsqrt": 1, "aten::pow": 1, "aten::dropout": 0, "aten::clone": 0,
    "aten::contiguous": 0, "aten::softmax": 5, "aten::_softmax": 5, "aten::log_softmax": 5,
    "aten::layer_norm": 7, "aten::native_layer_norm": 7, "aten::rms_norm": 4,
    "aten::_fused_rms_norm": 4, "aten::mean": 1, "aten::sum": 1,
}
#: Operators that move no data (views, metadata).
FREE = {"aten::t", "aten::view", "aten::reshape", "aten::transpose", "aten::permute",
        "aten::expand", "aten::as_strided", "aten::unsqueeze", "aten::squeeze", "aten::slice",
        "aten::select", "aten::detach", "aten::alias", "aten::_unsafe_view", "aten::split",
        "aten::chunk", "aten::unbind", "aten::empty", "aten::empty_like", "aten::zeros",
        "aten::resolve_conj", "aten::resolve_neg", "aten::lift_fresh"}
ROW_OPS = {"aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::layer_norm",
           "aten::native_layer_norm", "aten::rms_norm", "aten::_fused_rms_norm"}
MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::linear", "aten::bmm", "aten::matmul",
              "aten::baddbmm"}
ATTENTION_OPS = {"aten::scaled_dot_product_attention",
                 "aten::_scaled_dot_product_flash_attention",
                 "aten::_scaled_dot_product_efficient_attention",
                 "aten::_scaled_dot_product_attention_math"}


@dataclass(frozen=True)
class OpCost:
    """Work of one call: FLOPs, minimum bytes, output shape, and the dtype whose peak applies."""

    flops: float
    min_bytes: float
    out_shape: tuple[int, ...]
    compute_dtype: str
    kind: str  # "matmul", "attention", "elementwise", "rowwise", "free"


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape) if shape else 1


def _broadcast(shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        dims = [s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0]
        out.append(max(dims))
    return tuple(out)


def _tensors(shapes: Sequence[Any], dtypes: Sequence[str]) -> list[tuple[tuple[int, ...], str]]:
    """The (shape, dtype) of every tensor argument (scalars and lists have no dtype size)."""
    found = []
    for shape, dtype in zip(shapes, dtypes, strict=False):
        if dtype in DTYPE_SIZES and isinstance(shape, list | tuple) and \
                all(isinstance(d, int) for d in shape):
            found.append((tuple(shape), dtype))
    return found


def _matmul_out(name: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    if name == "aten::linear":
        x, w = shapes[0], shapes[1]
        return (*x[:-1], w[0])
    if name in ("aten::addmm", "aten::baddbmm"):
        a, b = shapes[1], shapes[2]
        return (*a[:-1], b[-1])
    a, b = shapes[0], shapes[1]
    if len(b) == 1:
        return tuple(a[:-1])
    return (*_broadcast([a[:-2], b[:-2]]), a[-2] if len(a) > 1 else 1, b[-1])


def _matmul_flops(name: str, shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> float:
    k = shapes[0][-1] if name in ("aten::linear", "aten::mm", "aten::bmm", "aten::matmul") \
        else shapes[1][-1]
    flops = 2.0 * _numel(out) * k
    if name in ("aten::addmm", "aten::baddbmm") or (name == "aten::linear" and len(shapes) > 2):
        flops += _numel(out)  # the bias add
    return flops


def op_cost(name: str, input_shapes: Sequence[Any], input_dtypes: Sequence[str],
            ) -> OpCost | None:
    """The cost of one call of ``name`` (``aten::…``) with these inputs, or None if unknown."""
    tensors = _tensors(input_shapes, input_dtypes)
    if name in FREE:
        out = tensors[0][0] if tensors else ()
        return OpCost(0.0, 0.0, out, "fp32", "free")
    if not tensors:
        return None
    shapes = [s for s, _ in tensors]
    dtype = tensors[0][1]
    size = DTYPE_SIZES[dtype]
    compute = COMPUTE_DTYPES.get(dtype, "fp32")
    read = sum(_numel(s) * DTYPE_SIZES[d] for s, d in tensors)
    if name in MATMUL_OPS and len(shapes) >= 2:
        mm_out = _matmul_out(name, shapes)
        if mm_out is None:
            return None
        return OpCost(_matmul_flops(name, shapes, mm_out), read + _numel(mm_out) * size,
                      mm_out, compute, "matmul")
    if name in ATTENTION_OPS and len(shapes) >= 3:
        q, k = shapes[0], shapes[1]
        out = (*q[:-1], shapes[2][-1])
        flops = 4.0 * _numel(q[:-2]) * q[-2] * k[-2] * q[-1]
        return OpCost(flops, read + _numel(out) * size, out, compute, "attention")
    if name in ELEMENTWISE_FLOPS:
        out = shapes[0] if name in ROW_OPS else _broadcast(shapes)
        per = ELEMENTWISE_FLOPS[name]
        kind = "rowwise" if name in ROW_OPS else "elementwise"
        if name in ("aten::mean", "aten::sum"):
            return OpCost(float(_numel(shapes[0])), read + size, (), compute, kind)
        return OpCost(float(per * _numel(out)), read + _numel(out) * size, out, "fp32", kind)
    return None
