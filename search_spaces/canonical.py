"""Canonical JSON and stable hashes.

Every key in the service (search-space hash, config hash, fingerprints) is the SHA-256 of the
canonical JSON of a plain value: keys sorted, no whitespace, ASCII only. Never ``repr``: a repr
changes when a class gains a field, canonical JSON changes only when the value does.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """The one serialisation used for hashing: sorted keys, compact separators, ASCII.

    Raises ``TypeError`` for values JSON cannot represent (sets, objects) and ``ValueError``
    for NaN or infinities, so an unhashable value fails loudly instead of hashing its repr.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


def stable_hash(value: Any, length: int = 64) -> str:
    """SHA-256 hex digest of ``canonical_json(value)``, truncated to ``length`` characters."""
    return hashlib.sha256(canonical_json(value).encode("ascii")).hexdigest()[:length]
