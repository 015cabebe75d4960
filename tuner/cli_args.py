"""Parsing of command-line values into service values, with one-line errors.

Every function raises ``UsageError`` with a message meant for the user; the CLI prints it and
exits with status 2 before anything is written.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence

from tuner.core.devices import CPU_KIND
from tuner.core.devices import known_kinds


class UsageError(ValueError):
    """Bad command-line input."""


_INT = re.compile(r"^[+-]?\d+$")


def parse_int(text: str, what: str) -> int:
    text = text.strip().replace("_", "")
    if not _INT.match(text):
        raise UsageError(f"{what} must be an integer, got {text!r}")
    return int(text)


def parse_shape(text: str, dims: Sequence[str]) -> dict[str, int]:
    """``M=512,N=256,K=128`` or ``512x256x128`` (values in the kernel's dimension order)."""
    text = text.strip()
    if not text:
        raise UsageError("empty shape")
    if "=" in text:
        shape: dict[str, int] = {}
        for part in text.split(","):
            if "=" not in part:
                raise UsageError(f"malformed shape {text!r}: expected NAME=VALUE pairs "
                                 f"like {example_shape(dims)}")
            name, value = (s.strip() for s in part.split("=", 1))
            if name in shape:
                raise UsageError(f"dimension {name} given twice in {text!r}")
            shape[name] = parse_int(value, f"dimension {name}")
        return shape
    parts = re.split(r"[x×,]", text.lower())
    if len(parts) != len(dims):
        raise UsageError(f"malformed shape {text!r}: expected {len(dims)} sizes "
                         f"({'x'.join(dims)}) or {example_shape(dims)}")
    return {d: parse_int(p, f"dimension {d}") for d, p in zip(dims, parts, strict=True)}


def example_shape(dims: Sequence[str]) -> str:
    return ",".join(f"{d}=512" for d in dims)


def gpu_visible() -> bool:
    """True when ``nvidia-smi -L`` lists a GPU (never initialises CUDA in this process)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def resolve_backend(text: str) -> str:
    """``auto`` → ``cuda`` when a GPU is visible, else ``interpret``; others are checked."""
    if text == "auto":
        return "cuda" if gpu_visible() else "interpret"
    if text in ("interpret", "cuda") or re.fullmatch(r"cuda:\d+", text):
        return text
    if text.startswith("replay:") and len(text) > len("replay:"):
        return text
    if text.startswith("model:"):
        kind = text.split(":", 1)[1]
        if kind not in known_kinds() or kind == CPU_KIND:
            raise UsageError(f"the model backend predicts a datasheet GPU: model:<kind> with "
                             f"kind in {', '.join(known_kinds()[:-1])}")
        return text
    raise UsageError(f"unknown backend {text!r} (auto, interpret, cuda, cuda:N, "
                     "replay:<kernel tuner cache file> or model:<gpu kind>)")


def check_device_kind(kind: str, backend: str) -> str:
    if backend == "interpret" and kind != CPU_KIND:
        raise UsageError(f"the interpret backend runs on the host CPU; --device-kind must be "
                         f"'{CPU_KIND}', not {kind!r}")
    if backend.startswith("cuda") and kind == CPU_KIND:
        raise UsageError("device kind 'cpu' needs the interpret backend")
    if backend.startswith("cuda") and kind not in known_kinds():
        raise UsageError(f"unknown GPU kind {kind!r} (known: {', '.join(known_kinds()[:-1])})")
    return kind
