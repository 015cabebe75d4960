"""What a constraint sees besides the config: the problem, the dtype and the target device.

``TargetLimits`` are the hardware limits that decide whether a config can launch at all
(shared memory per block, registers per thread, threads per block). The tuner builds them from
its device table (``tuner.core.roofline``); this package only consumes them, so it stays a leaf.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any

#: Bytes per element of each dtype name the service accepts.
DTYPE_BYTES: dict[str, int] = {
    "fp32": 4,
    "tf32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8e4m3": 1,
    "fp8e5m2": 1,
}


@dataclass(frozen=True)
class TargetLimits:
    """Launch limits of one device kind. ``None`` means "no such limit" (the CPU interpreter).

    Units: bytes for shared memory, 32-bit registers for register counts.
    """

    kind: str
    smem_per_block_bytes: int | None = None
    max_regs_per_thread: int | None = None
    regs_per_sm: int | None = None
    max_threads_per_block: int | None = 1024
    sm_count: int | None = None
    warp_size: int = 32

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "smem_per_block_bytes": self.smem_per_block_bytes,
            "max_regs_per_thread": self.max_regs_per_thread,
            "regs_per_sm": self.regs_per_sm,
            "max_threads_per_block": self.max_threads_per_block,
            "sm_count": self.sm_count,
            "warp_size": self.warp_size,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TargetLimits:
        return cls(**dict(data))


@dataclass(frozen=True)
class Context:
    """The problem being tuned: its sizes (e.g. ``{"M": 512, "N": 512, "K": 512}``), the input
    dtype name (a key of ``DTYPE_BYTES``) and the target's limits."""

    problem: Mapping[str, int]
    dtype: str
    target: TargetLimits = field(default_factory=lambda: TargetLimits(kind="any"))

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]
