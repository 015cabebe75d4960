"""Fusion advice: chains of operators whose intermediates make a round trip through memory.

A chain is a run of consecutive top-level calls — a matmul or a memory-bound operator, then
memory-bound elementwise operators, ending at the first row-wise one (a norm or softmax) —
where each call takes the previous one's output as an input. The profiler records shapes, not
tensor identities, so "takes the previous output" means "has an input of the previous output's
shape" (views in between are skipped): a heuristic, stated as such in the report.

Fusing the chain into one kernel saves, per intermediate, its write and its read:
``2 · elements · s`` bytes. Its roofline on the target is that of the chain's FLOPs and its
bytes less the saving. Chains are mapped to the fusion chains and epilogues the service can
tune (``tuner/kernels``) where their operator sequence matches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.advisor.op_costs import DTYPE_SIZES
from tuner.advisor.op_costs import OpCost
from tuner.advisor.op_costs import op_cost
from tuner.core.devices.datasheets import DeviceSpec
from tuner.core.roofline import roof

#: Operator → its role in a tunable chain.
ROLES = {"aten::linear": "linear", "aten::addmm": "linear", "aten::gelu": "gelu",
         "aten::relu": "relu", "aten::silu": "silu", "aten::add": "add",
         "aten::layer_norm": "layernorm", "aten::native_layer_norm": "layernorm"}
#: Tunable chains by role sequence, longest first.
SERVICE_CHAINS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("linear", "gelu", "add", "layernorm"), "linear+bias+gelu+residual+layernorm"),
    *((("linear", act, "add"), f"matmul+bias+{act}+residual") for act in ("gelu", "relu", "silu")),
    *((("linear", act), f"matmul+bias+{act}") for act in ("gelu", "relu", "silu")),
    (("linear", "add"), "matmul+bias+residual"),
)


@dataclass(frozen=True)
class Call:
    """One top-level operator call: name, input shapes and dtypes, time (ms)."""

    op: str
    shapes: list[Any]
    dtypes: list[str]
    time_ms: float


@dataclass
class FusionChain:
    """A chain of calls (and how often it ran) with what fusing it would save on the target."""

    ops: list[str]
    shapes: list[Any]
    occurrences: int
    time_ms: float
    flops: float
    min_bytes: float
    saved_bytes: float
    fused_roof_ms: float | None
    service_kernel: str | None = None
    problem: dict[str, int] | None = None
    dtype: str | None = None
    #: Its time less the fused chain's roofline time on the device that ran it (ms).
    saving_ms: float | None = None


def _service_match(chain: Sequence[tuple[Call, OpCost]],
                   ) -> tuple[str | None, dict[str, int] | None, int]:
    """The tunable chain matching a prefix of ``chain``, its problem, and the prefix length."""
    roles = [ROLES.get(c.op) for c, _ in chain]
    for pattern, kernel in SERVICE_CHAINS:
        if tuple(roles[:len(pattern)]) == pattern:
            head, cost = chain[0]
            out = cost.out_shape
            k = head.shapes[1][-1] if head.op == "aten::addmm" else head.shapes[0][-1]
            problem = {"M": math.prod(out[:-1]), "N": out[-1], "K": int(k)}
            return kernel, problem, len(pattern)
    return None, None, len(chain)


def _tensor_shapes(call: Call) -> list[tuple[int, ...]]:
    return [tuple(s) for s, d in zip(call.shapes, call.dtypes, strict=False)
            if d in DTYPE_SIZES and isinstance(s, list)]


def _chains(calls: Sequence[Call]) -> list[list[tuple[Call, OpCost]]]:
    found = []
    i = 0
    while i < len(calls):
        cost = op_cost(calls[i].op, calls[i].shapes, calls[i].dtypes)
        if cost is None or cost.kind not in ("matmul", "elementwise", "rowwise"):
            i += 1
            continue
        seq = [(calls[i], cost)]
        j = i + 1
        while j < len(calls):
            nxt = op_cost(calls[j].op, calls[j].shapes, calls[j].dtypes)
            if nxt is not None and nxt.kind == "free":
                j += 1
                continue
            if nxt is None or nxt.kind not in ("elementwise", "rowwise") \
                    or seq[-1][1].out_shape not in _tensor_shapes(calls[j]):
                break
            seq.append((calls[j], nxt))
            j += 1
            if nxt.kind == "rowwise":
                break  # a norm or softmax ends a chain: its output feeds the next matmul
        if len(seq) >= 2:
            found.append(seq)
            i = j
        else:
            i += 1
    return found


def find_chains(calls: Sequence[Call], target: DeviceSpec | None) -> list[FusionChain]:
    """Fusable chains among ``calls``, aggregated by operators and shapes, largest saving
    first."""
    merged: dict[str, FusionChain] = {}
    for seq in _chains(calls):
        kernel, problem, _ = _service_match(seq)
        dtype_name = seq[0][0].dtypes[0] if seq[0][0].dtypes else "float"
        size = DTYPE_SIZES.get(dtype_name, 4)
        saved = sum(2.0 * math.prod(cost.out_shape) * size for _, cost in seq[:-1])
        flops = sum(cost.flops for _, cost in seq)
        total_bytes = sum(cost.min_bytes for _, cost in seq)
        fused: float | None = None
        if target is not None:
            fused = roof(flops, max(total_bytes - saved, 1.0),
                         target.tflops.get(seq[0][1].compute_dtype),
                         target.bandwidth_gbps).roof_ms
        key = repr([(c.op, c.shapes) for c, _ in seq])
        if key in merged:
            m = merged[key]
            m.occurrences += 1
            m.time_ms += sum(c.time_ms for c, _ in seq)
            continue
        merged[key] = FusionChain(
            ops=[c.op for c, _ in seq], shapes=[c.shapes for c, _ in seq], occurrences=1,
            time_ms=sum(c.time_ms for c, _ in seq), flops=flops, min_bytes=total_bytes,
            saved_bytes=saved, fused_roof_ms=fused, service_kernel=kernel, problem=problem,
            dtype=seq[0][1].compute_dtype)
    return sorted(merged.values(), key=lambda c: -c.saved_bytes * c.occurrences)
