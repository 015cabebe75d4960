"""``tuner plan``: turn a profile into tuning jobs, with the trial budget split by expected gain.

Candidates are the profiled operators the service has a kernel for (``aten::linear`` /
``addmm`` / ``mm`` → ``matmul`` or ``matmul+bias``, softmax, layernorm, rmsnorm,
``scaled_dot_product_attention`` → ``attention``) and the fusable chains that match a tunable
chain or epilogue. The expected gain of each is its largest possible saving on the device that
ran the profile (its time minus its roofline time; for a chain, the chain's time minus the
fused chain's roofline time). **Each operator call is counted once**: the calls a tunable
chain covers belong to the chain's job, and an operator's own job keeps only the gain of its
remaining calls (pro rata), so the shares add up to at most the operators' share of the run and
the expected gains to at most its time. The total trial budget is split in proportion to the
gains, at least ``min_trials`` each, largest gain first; candidates with no gain, or in a dtype
the kernel has no variant for (e.g. fp32 attention), get no job.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from dataclasses import dataclass
from typing import Any

from tuner.advisor.profile import OpGroup
from tuner.advisor.profile import Profile

SUPPORTED_DTYPES = ("fp32", "fp16", "bf16")


@dataclass
class PlanEntry:
    """One tuning job: kernel, problem, dtype, expected gain (ms and share), trials."""

    kernel: str
    problem: dict[str, int]
    dtype: str
    gain_ms: float
    gain_share: float
    source: str  # "operator" or "chain"
    detail: str
    trials: int = 0

    def shape_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.problem.items())

    def command(self, device_kind: str) -> str:
        return (f"tuner submit {self.kernel} --shape {self.shape_text()} --dtype {self.dtype} "
                f"--trials {self.trials} --device-kind {device_kind}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _tensor_shapes(g: OpGroup) -> list[list[int]]:
    return [s for s, d in zip(g.shapes, g.dtypes, strict=False)
            if isinstance(s, list) and s and d not in ("Scalar", "ScalarList", "")]


def operator_job(g: OpGroup) -> tuple[str, dict[str, int]] | None:
    """The service kernel and problem for a profiled operator group, if there is one."""
    shapes = _tensor_shapes(g)
    if not shapes:
        return None
    if g.op == "aten::linear" and len(shapes) >= 2:
        x, w = shapes[0], shapes[1]
        kernel = "matmul+bias" if len(shapes) >= 3 else "matmul"
        return kernel, {"M": math.prod(x[:-1]), "N": w[0], "K": x[-1]}
    if g.op == "aten::addmm" and len(shapes) >= 3:
        a, b = shapes[1], shapes[2]
        return "matmul+bias", {"M": a[0], "N": b[1], "K": a[1]}
    if g.op == "aten::mm" and len(shapes) >= 2:
        a, b = shapes[0], shapes[1]
        return "matmul", {"M": a[0], "N": b[1], "K": a[1]}
    rows = {"aten::softmax": "softmax", "aten::_softmax": "softmax",
            "aten::layer_norm": "layernorm", "aten::rms_norm": "rmsnorm"}
    if g.op in rows:
        x = shapes[0]
        return rows[g.op], {"M": math.prod(x[:-1]), "N": x[-1]}
    if g.op == "aten::scaled_dot_product_attention" and len(shapes[0]) == 4:
        z, h, s, d = shapes[0]
        return "attention", {"Z": z, "H": h, "S": s, "D": d}
    return None


def _supports(kernel: str, dtype: str) -> bool:
    """Whether the service's ``kernel`` has a ``dtype`` variant (attention: fp16/bf16 only)."""
    from tuner.kernels import load_kernel

    return dtype in load_kernel(kernel).dtypes


def candidates(profile: Profile) -> list[PlanEntry]:
    wall = profile.wall_ms or 1.0
    found = []
    covered: dict[str, int] = {}  # calls of (op, shapes) that a chain's job accounts for
    for c in profile.chains:
        if not c.service_kernel or not c.problem or c.dtype not in SUPPORTED_DTYPES \
                or not c.saving_ms or not _supports(c.service_kernel, c.dtype):
            continue
        found.append(PlanEntry(c.service_kernel, dict(c.problem), c.dtype, c.saving_ms,
                               c.saving_ms / wall, "chain",
                               " → ".join(c.ops) + f" ×{c.occurrences}"))
        for op, shapes in zip(c.ops, c.shapes, strict=False):
            key = json.dumps([op, shapes])
            covered[key] = covered.get(key, 0) + c.occurrences
    for g in profile.groups:
        job = operator_job(g)
        if job is None or g.compute_dtype not in SUPPORTED_DTYPES or not g.saving_ms:
            continue
        key = json.dumps([g.op, g.shapes])
        left = max(0, g.calls - covered.get(key, 0))
        covered[key] = max(0, covered.get(key, 0) - g.calls)  # one group per dtype set
        if left == 0:
            continue  # every call of it is inside a chain that has its own job
        kernel, problem = job
        gain = g.saving_ms * left / max(g.calls, 1)
        detail = f"{g.op} ×{left}" + (f" (of {g.calls}; the rest in chains)"
                                      if left < g.calls else "")
        found.append(PlanEntry(kernel, problem, g.compute_dtype, gain, gain / wall,
                               "operator", detail))
    found = [e for e in found if _supports(e.kernel, e.dtype)]
    merged: dict[tuple[str, str, str], PlanEntry] = {}
    for e in found:  # the same kernel and problem from several places: one job, gains added
        same = (e.kernel, e.shape_text(), e.dtype)
        if same in merged:
            merged[same].gain_ms += e.gain_ms
            merged[same].gain_share += e.gain_share
            merged[same].detail += f"; {e.detail}"
        else:
            merged[same] = e
    return sorted(merged.values(), key=lambda e: -e.gain_ms)


def make_plan(profile: Profile, total_trials: int = 200, min_trials: int = 5,
              max_jobs: int | None = None) -> list[PlanEntry]:
    """Jobs, largest expected gain first, with ``total_trials`` split by gain."""
    if total_trials < 1 or min_trials < 1:
        raise ValueError("the trial budget and the minimum per job must be positive")
    entries = candidates(profile)[:max_jobs]
    entries = entries[:max(1, total_trials // min_trials)]
    if not entries:
        return []
    gains = sum(e.gain_ms for e in entries)
    spare = total_trials - min_trials * len(entries)
    for e in entries:
        e.trials = min_trials + int(spare * e.gain_ms / gains)
    leftover = total_trials - sum(e.trials for e in entries)
    for e in entries[:leftover]:
        e.trials += 1
    return entries
