"""Shapes production launched without an exact tuned config, recorded by ``tuner.autotune(...,
record_missing=True)``, turned into tuning jobs (``tuner tune --missing FILE``).

Each line of the file is ``{"kernel", "file", "problem", "dtype", "device_kind", "served"}``.
Lines are grouped by kernel and dtype, each group one job over its distinct problems. The
kernel to tune is the built-in of that name, else ``file:kernel`` (the convention loader finds
the launcher of an autotuned kernel in its file: ``tuner.kernels.convention``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from tuner.core.parsing import UsageError
from tuner.kernels.names import BUILTIN


@dataclass
class MissingGroup:
    """One job's worth of missing shapes: a kernel reference, a dtype and its problems."""

    ref: str
    dtype: str
    shapes: list[str] = field(default_factory=list)


def _ref(line: dict[str, object]) -> str:
    kernel = str(line["kernel"])
    if kernel in BUILTIN or kernel.startswith("matmul+") or not line.get("file"):
        return kernel
    return f"{line['file']}:{kernel}"


def missing_groups(path: Path, device_kind: str | None = None) -> list[MissingGroup]:
    """The jobs for the shapes recorded in ``path`` (only those recorded on ``device_kind``
    when given); ``UsageError`` for a file that cannot be read or a malformed line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    groups: dict[tuple[str, str], MissingGroup] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            problem = {str(k): int(v) for k, v in dict(line["problem"]).items()}
            ref, dtype = _ref(line), str(line["dtype"])
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{path}:{number} is not a recorded shape ({exc})") from None
        if device_kind is not None and line.get("device_kind") not in (None, device_kind):
            continue
        group = groups.setdefault((ref, dtype), MissingGroup(ref, dtype))
        shape = ",".join(f"{k}={v}" for k, v in problem.items())
        if shape not in group.shapes:
            group.shapes.append(shape)
    if not groups:
        raise UsageError(f"{path} records no missing shapes"
                         + (f" for {device_kind}" if device_kind else ""))
    return list(groups.values())
