"""``tuner profile``: run a torch program under ``torch.profiler`` and say where its time goes.

The program (a script path or a module name) runs once in this process under the profiler with
shapes recorded. Its top-level operator calls (``aten::…`` not called by another ``aten::`` op)
are grouped by operator, input shapes and dtypes; each group gets its time (CUDA time where the
program ran on a GPU, else CPU time), its share of the program's wall time, its FLOPs and
minimum bytes (``op_costs``), its roofline time on the device that ran it (the host's measured
ceilings on a CPU, the datasheet on a GPU) and on the ``target`` device kind, the achieved
fraction, and the largest possible saving: its time minus its roofline time on the device that
ran it (Amdahl: the program can get no faster than that). Time outside operators (Python, data
loading, waiting) is one row of its own, so the shares sum to 1.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from tuner.advisor.fusion import Call
from tuner.advisor.fusion import FusionChain
from tuner.advisor.fusion import find_chains
from tuner.advisor.op_costs import op_cost
from tuner.core.devices.datasheets import device_spec
from tuner.core.roofline import Ceilings
from tuner.core.roofline import roof


@dataclass
class OpGroup:
    """One operator with one set of input shapes: totals over its calls (ms, FLOPs, bytes)."""

    op: str
    shapes: list[Any]
    dtypes: list[str]
    calls: int = 0
    time_ms: float = 0.0
    share: float = 0.0
    flops: float | None = None
    min_bytes: float | None = None
    compute_dtype: str | None = None
    kind: str | None = None
    bound: str | None = None
    roof_ms_here: float | None = None
    roof_ms_target: float | None = None
    fraction: float | None = None
    saving_ms: float | None = None
    saving_share: float | None = None


@dataclass
class Profile:
    """A profiled run: its groups (largest time first), the time outside operators, chains."""

    program: str
    device: str  # "cpu" or "cuda"
    device_kind: str  # of the device that ran it
    target_kind: str
    wall_ms: float
    op_ms: float
    outside_ms: float
    outside_share: float
    groups: list[OpGroup] = field(default_factory=list)
    chains: list[FusionChain] = field(default_factory=list)
    #: The ceilings of the device that ran it: peak TFLOP/s by dtype, and GB/s.
    peaks: dict[str, float] = field(default_factory=dict)
    bandwidth_gbps: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Profile:
        groups = [OpGroup(**g) for g in data.get("groups", [])]
        chains = [FusionChain(**c) for c in data.get("chains", [])]
        rest = {k: v for k, v in data.items() if k not in ("groups", "chains")}
        return cls(**rest, groups=groups, chains=chains)


def run_program(program: str, argv: Sequence[str]) -> None:
    """Run ``program`` (``path.py`` or a module name) as ``__main__`` with ``argv``."""
    saved = sys.argv[:]
    try:
        if program.endswith(".py"):
            path = Path(program)
            if not path.is_file():
                raise FileNotFoundError(f"no such script: {program}")
            sys.argv = [str(path), *argv]
            runpy.run_path(str(path), run_name="__main__")
        else:
            sys.argv = [program, *argv]
            runpy.run_module(program, run_name="__main__", alter_sys=True)
    finally:
        sys.argv = saved


def _top_level(events: Sequence[Any], on_gpu: bool) -> list[Call]:
    calls = []
    for e in sorted(events, key=lambda e: e.time_range.start):
        if not e.name.startswith("aten::"):
            continue
        parent = e.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        if parent is not None:
            continue
        us = e.device_time_total if on_gpu and e.device_time_total > 0 else e.cpu_time_total
        calls.append(Call(e.name, [list(s) if isinstance(s, list | tuple) else s
                                   for s in e.input_shapes], list(e.input_dtypes), us / 1e3))
    return calls


#: Measures the ceilings of the running device: ``measure(device, name)`` with ``device``
#: "cpu" or "cuda" and ``name`` the device kind → ``{"tflops": {dtype: …}, "bandwidth_gbps":
#: …}``. The caller supplies it (the service's calibration, ``tuner.measure.calibrate``).
MeasureCeilings = Callable[[str, str], Mapping[str, Any]]


def _ceilings(device: str, measure: MeasureCeilings) -> tuple[str, dict[str, float], float]:
    """(device kind, peak TFLOP/s by dtype, bandwidth GB/s) of the running device: the
    datasheet of a known GPU, else its (or the host's) measured ceilings."""
    from tuner.charts import device_ceilings

    kind = "cpu"
    if device == "cuda":
        import torch

        from tuner.core.devices.datasheets import normalise_device_name

        kind = normalise_device_name(torch.cuda.get_device_name())
    found = device_ceilings(kind)
    if found is None:  # the host CPU, or a GPU the datasheet table does not know
        found = device_ceilings(None, measure(device, kind))
    if found is None:
        raise RuntimeError(f"no ceilings could be measured for {kind}")
    return kind, dict(found[0]), found[1]


def summarise(program: str, calls: Sequence[Call], wall_ms: float, device: str,
              device_kind: str, peaks: dict[str, float], bandwidth_gbps: float,
              target_kind: str) -> Profile:
    """Group the calls and score them (see the module docstring)."""
    target = device_spec(target_kind)
    ceilings = Ceilings(tflops=peaks, bandwidth_gbps=bandwidth_gbps)

    def peak(dtype: str) -> float | None:  # a CPU computes any dtype at its fastest rate
        return ceilings.host_peak(dtype) if device == "cpu" else ceilings.peak(dtype)

    groups: dict[str, OpGroup] = {}
    for c in calls:
        key = json.dumps([c.op, c.shapes, c.dtypes])
        g = groups.setdefault(key, OpGroup(c.op, c.shapes, c.dtypes))
        g.calls += 1
        g.time_ms += c.time_ms
    op_ms = sum(g.time_ms for g in groups.values())
    wall_ms = max(wall_ms, op_ms)
    for g in groups.values():
        g.share = g.time_ms / wall_ms if wall_ms > 0 else 0.0
        cost = op_cost(g.op, g.shapes, g.dtypes)
        if cost is None:
            continue
        g.kind, g.compute_dtype = cost.kind, cost.compute_dtype
        g.flops, g.min_bytes = cost.flops * g.calls, cost.min_bytes * g.calls
        if cost.min_bytes <= 0:
            continue
        here = roof(g.flops, g.min_bytes, peak(cost.compute_dtype), bandwidth_gbps)
        g.bound, g.roof_ms_here = here.bound, here.roof_ms
        g.fraction = here.roof_ms / g.time_ms if g.time_ms > 0 else None
        g.saving_ms = max(0.0, g.time_ms - here.roof_ms)
        g.saving_share = g.saving_ms / wall_ms if wall_ms > 0 else 0.0
        if target is not None:
            g.roof_ms_target = roof(g.flops, g.min_bytes, target.tflops.get(cost.compute_dtype),
                                    target.bandwidth_gbps).roof_ms
    ordered = sorted(groups.values(), key=lambda g: -g.time_ms)
    outside = max(0.0, wall_ms - op_ms)
    chains = find_chains(calls, target)
    for chain in chains:
        fused_here = roof(chain.flops, max(chain.min_bytes - chain.saved_bytes, 1.0),
                          peak(chain.dtype or "fp32"), bandwidth_gbps).roof_ms
        chain.saving_ms = max(0.0, chain.time_ms - fused_here * chain.occurrences)
    return Profile(program, device, device_kind, target_kind, wall_ms, op_ms, outside,
                   outside / wall_ms if wall_ms > 0 else 0.0, ordered, chains, dict(peaks),
                   bandwidth_gbps)


def profile_program(program: str, argv: Sequence[str], target_kind: str, device: str | None,
                    measure: MeasureCeilings) -> Profile:
    """Run and profile ``program``; ``device`` defaults to cuda when available, else cpu;
    ``measure`` gives the running device's ceilings when no datasheet has them."""
    # Kineto (the profiler's backend) prints "USDT:… profiler_start" lines on stderr at its
    # default level; they say nothing to the user. Set before its first use.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile

    on_gpu = device == "cuda" if device else torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities, record_shapes=True) as prof:
        start = time.perf_counter()
        run_program(program, argv)
        if on_gpu:
            torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - start) * 1e3
    calls = _top_level(prof.events(), on_gpu)
    kind, peaks, bandwidth = _ceilings("cuda" if on_gpu else "cpu", measure)
    return summarise(program, calls, wall_ms, "cuda" if on_gpu else "cpu", kind, peaks,
                     bandwidth, target_kind)
