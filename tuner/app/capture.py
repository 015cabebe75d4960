"""``tuner capture -- CMD``: run a program once with the launch recorder installed, merge what
its processes recorded into one capture file, and rank the kernels by their share of the time
(``tuner.kernels.captured`` describes the file).

The table says, per (kernel, problem): calls, seconds, share of all kernel time, the bytes its
tensors hold (a lower bound on its memory traffic), the time those bytes take at the GPU's
datasheet bandwidth (the memory roofline; none on the CPU, where no datasheet applies), and
the Amdahl bound: the most tuning it can save, as seconds of the program (its whole time when
no roofline applies, else what separates it from the roofline).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.core.devices.datasheets import device_spec
from tuner.core.devices.datasheets import normalise_device_name
from tuner.core.parsing import UsageError
from tuner.kernels.captured import SCHEMA
from tuner.kernels.captured import dtype_of
from tuner.kernels.captured import load_capture

SITE = Path(__file__).resolve().parent.parent / "kernels" / "capture_site"


@dataclass(frozen=True)
class CaptureRow:
    """One (kernel, problem) of a capture, with its time and what tuning can save (seconds)."""

    kernel: str
    problem: dict[str, int]
    dtype: str
    calls: int
    seconds: float
    share: float
    bytes: int
    roof_seconds: float | None
    can_save_s: float


def run_capture(command: list[str], out: Path) -> tuple[int, float]:
    """Run ``command`` with the recorder installed; write the merged capture to ``out``.
    Returns the program's exit status and wall seconds (``UsageError`` when it cannot start
    or recorded no Triton launch)."""
    if not command:
        raise UsageError("give the program to run after --, e.g. tuner capture -- python "
                         "train.py")
    with tempfile.TemporaryDirectory(prefix="tuner-capture-") as folder:
        env = dict(os.environ, TUNER_CAPTURE_DIR=folder,
                   PYTHONPATH=os.pathsep.join(p for p in (str(SITE),
                                                          os.environ.get("PYTHONPATH")) if p))
        start = time.perf_counter()
        try:
            status = subprocess.run(command, env=env, check=False).returncode
        except OSError as exc:
            raise UsageError(f"cannot run {command[0]}: {exc.strerror or exc}") from None
        wall = time.perf_counter() - start
        parts = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("part-*.json"))]
    if not parts:
        raise UsageError(f"{' '.join(command)} launched no Triton kernel (exit status {status})"
                         "; nothing captured (the recorder runs in a Python that has the tuner "
                         f"installed, e.g. {sys.executable})")
    out.write_text(json.dumps(merge(parts, command, wall), indent=1))
    return status, wall


def merge(parts: list[dict[str, Any]], command: list[str], wall: float) -> dict[str, Any]:
    """One capture from the parts of each process: launches of one (kernel, problem) add up."""
    kernels: dict[str, dict[str, Any]] = {}
    for part in parts:
        for kernel in part["kernels"]:
            into = kernels.setdefault(kernel["name"], {**kernel, "launches": []})
            known = {json.dumps(x["problem"], sort_keys=True): x for x in into["launches"]}
            for launch in kernel["launches"]:
                same = known.get(json.dumps(launch["problem"], sort_keys=True))
                if same is None:
                    into["launches"].append(launch)
                else:
                    same["calls"] += launch["calls"]
                    same["seconds"] += launch["seconds"]
    device = next((p for p in parts if p["device"] == "cuda"), parts[0])
    return {"schema": SCHEMA, "command": command, "program_seconds": wall,
            "device": device["device"], "device_name": device.get("device_name"),
            "interpreted": any(p.get("interpreted") for p in parts),
            "kernels": sorted(kernels.values(),
                              key=lambda k: -sum(x["seconds"] for x in k["launches"]))}


def capture_rows(path: Path) -> list[CaptureRow]:
    """The (kernel, problem) rows of a capture file, largest share of kernel time first."""
    doc = load_capture(path)
    spec = device_spec(normalise_device_name(doc["device_name"])) \
        if doc.get("device_name") else None
    bandwidth = spec.bandwidth_gbps * 1e9 if spec is not None else None
    total = sum(x["seconds"] for k in doc["kernels"] for x in k["launches"]) or 1.0
    rows = []
    for kernel in doc["kernels"]:
        for launch in kernel["launches"]:
            roof = launch["bytes"] * launch["calls"] / bandwidth if bandwidth else None
            save = launch["seconds"] - roof if roof is not None else launch["seconds"]
            rows.append(CaptureRow(kernel["name"], launch["problem"], dtype_of(launch),
                                   launch["calls"], launch["seconds"], launch["seconds"] / total,
                                   launch["bytes"], roof, max(save, 0.0)))
    return sorted(rows, key=lambda r: -r.seconds)


def selected(path: Path, top: int | None, min_share: float | None) -> list[CaptureRow]:
    """The rows ``tuner tune --captured`` tunes: the ``top`` largest, or every row with at
    least ``min_share`` of the kernel time (default: those with at least 1 %)."""
    rows = [r for r in capture_rows(path) if r.seconds > 0]
    if top is not None:
        return rows[:top]
    return [r for r in rows if r.share >= (0.01 if min_share is None else min_share)]


def tune_groups(path: Path, top: int | None, min_share: float | None) -> list[Any]:
    """One ``MissingGroup`` (kernel reference ``<capture>:<kernel>``, dtype, problems) per
    captured kernel and dtype among the selected rows, in the order of their time."""
    from tuner.app.missing import MissingGroup

    groups: dict[tuple[str, str], Any] = {}
    for row in selected(path, top, min_share):
        group = groups.setdefault((row.kernel, row.dtype),
                                  MissingGroup(f"{path}:{row.kernel}", row.dtype, []))
        group.shapes.append(",".join(f"{k}={v}" for k, v in row.problem.items()))
    if not groups:
        raise UsageError(f"no captured launch of {path} passes the selection (--top, "
                         "--min-share)")
    return list(groups.values())
