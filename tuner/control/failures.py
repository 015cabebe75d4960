"""Repeated failures: when every config fails the same way, stop measuring and say why.

A kernel that does not compile, or whose every config times out or gives a wrong result, fails
the same way whatever the search proposes: spending the rest of the budget on it burns GPU time
and hides the one message that matters. A failure's *signature* is its status and the first line
of its error with numbers, addresses and quoted names masked (so "error 3.1e-01 exceeds" and
"error 2.7e-01 exceeds" are the same failure). ``FailureStreak`` counts measured configs in a
row with one signature; the driver stops a problem with no success once the streak reaches
``SAME_FAILURE_STOP``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

#: Measured configs in a row failing the same way, with no success, that stop a problem.
SAME_FAILURE_STOP = 6
#: Statuses that say nothing about the kernel (the fleet lost the trial).
NOT_THE_KERNEL = ("lost", "cancelled", "invalid")

_MASKS = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x…"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "'…'"),
    (re.compile(r"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?"), "#"),
)


def first_line(error: str | None) -> str:
    """The first non-empty line of an error text, without the ``[phase]`` prefix."""
    for line in (error or "").splitlines():
        line = re.sub(r"^\[\w+\]\s*", "", line.strip())
        if line:
            return line[:300]
    return ""


def signature(status: str, error: str | None) -> str:
    """``status: first line`` with the parts that vary between configs masked."""
    text = first_line(error)
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return f"{status}: {text}"


@dataclass
class FailureStreak:
    """Consecutive measured failures with one signature (reset by a success or a new one)."""

    count: int = 0
    key: str | None = None
    example: str = ""

    def add(self, status: str, error: str | None) -> None:
        if status == "ok":
            self.count, self.key, self.example = 0, None, ""
            return
        if status in NOT_THE_KERNEL:
            return
        key = signature(status, error)
        if key == self.key:
            self.count += 1
        else:
            self.count, self.key = 1, key
            self.example = f"{status}: {first_line(error)}"

    def stop_reason(self, any_success: bool) -> str | None:
        if any_success or self.count < SAME_FAILURE_STOP:
            return None
        return f"the same failure on {self.count} configs in a row, none passed ({self.example})"


def dominant_failure(failures: Iterable[tuple[str, str | None]]) -> tuple[str, int, int] | None:
    """The most common failure among (status, error) pairs: (``status: first line`` of an
    example, how many share its signature, how many failures in all); None without any."""
    examples: dict[str, str] = {}
    counts: Counter[str] = Counter()
    for status, error in failures:
        if status == "ok" or status in NOT_THE_KERNEL:
            continue
        key = signature(status, error)
        counts[key] += 1
        examples.setdefault(key, f"{status}: {first_line(error)}")
    if not counts:
        return None
    key, n = counts.most_common(1)[0]
    return examples[key], n, sum(counts.values())
