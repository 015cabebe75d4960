"""Parsing of user-given values (shapes, sizes) into service values, with one-line errors.

Every function raises ``UsageError`` with a message meant for the user: the CLI prints it and
exits with status 2 before anything is written; the Python API raises it (a ``ValueError``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence


class UsageError(ValueError):
    """Bad user input (a command-line value or an API argument)."""


#: An integer as users type it: ASCII digits only (no ``1_024``, no full-width digits).
_INT = re.compile(r"^[+-]?[0-9]+$", re.ASCII)
#: More digits than any bounded value of the service has (2**63 has 19).
MAX_DIGITS = 19


def parse_int(text: str, what: str) -> int:
    text = text.strip()
    if not _INT.match(text):
        raise UsageError(f"{what} must be an integer, got {_shown(text)}")
    if len(text.lstrip("+-")) > MAX_DIGITS:
        raise UsageError(f"{what} has {len(text.lstrip('+-'))} digits; no value here has "
                         f"more than {MAX_DIGITS}")
    return int(text)


def _shown(text: str, limit: int = 60) -> str:
    """``text`` quoted for an error line, cut to ``limit`` characters."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f" … ({len(text)} chars)"


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
    if not dims:  # a kernel known by name only: its dimension names are not known here
        raise UsageError(f"malformed shape {text!r}: name each dimension, NAME=VALUE pairs "
                         "as the stored problem has them (tuner status shows them, e.g. "
                         "p0=4096,p1=4096)")
    if len(parts) != len(dims):
        raise UsageError(f"malformed shape {text!r}: expected {len(dims)} sizes "
                         f"({'x'.join(dims)}) or {example_shape(dims)}")
    return {d: parse_int(p, f"dimension {d}") for d, p in zip(dims, parts, strict=True)}


def example_shape(dims: Sequence[str]) -> str:
    return ",".join(f"{d}=512" for d in dims)
