"""Parsing of user-given values (shapes, sizes) into service values, with one-line errors.

Every function raises ``UsageError`` with a message meant for the user: the CLI prints it and
exits with status 2 before anything is written; the Python API raises it (a ``ValueError``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence


class UsageError(ValueError):
    """Bad user input (a command-line value or an API argument)."""


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
