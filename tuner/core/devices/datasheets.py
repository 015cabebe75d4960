"""Device kinds: datasheet peaks, launch limits and name normalisation.

Peaks are dense (no 2:4 sparsity) datasheet figures from ``docs/PERFORMANCE_FACTS.md`` §1
(TFLOP/s per dtype, HBM bandwidth in GB/s). The A100 40 GB bandwidth (1,555 GB/s) is from the
NVIDIA A100 datasheet, the same source as the 80 GB row. The host CPU has no datasheet here: it
is scored against ceilings measured on the spot (``tuner.measure.calibrate``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field

from search_spaces import TargetLimits

#: Kind name of the host CPU (the Triton interpreter runs there).
CPU_KIND = "cpu"

HOPPER_SMEM_OPTIN = 232448  # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN on sm_90
AMPERE_SMEM_OPTIN = 166912  # sm_80: 163 KB
ADA_SMEM_OPTIN = 101376  # sm_89: 99 KB


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU kind from its datasheet. ``tflops`` maps a compute dtype to its dense peak."""

    kind: str
    marketing_name: str
    compute_capability: tuple[int, int]
    sm_count: int
    bandwidth_gbps: float
    l2_bytes: int
    smem_per_block_optin: int
    tflops: Mapping[str, float] = field(default_factory=dict)

    @property
    def exp_per_s(self) -> float | None:
        """Exponentials per second on the special-function units: 16 per SM per clock
        (sm_80/89/90) at the clock the datasheet peaks assume (≈ 3.9e12/s on an H100 SXM,
        ``docs/PERFORMANCE_FACTS.md`` §2)."""
        ghz = PEAK_CLOCK_GHZ.get(self.kind)
        return None if ghz is None else SFU_EXP_PER_CLOCK * self.sm_count * ghz * 1e9

    def limits(self) -> TargetLimits:
        return TargetLimits(
            kind=self.kind,
            smem_per_block_bytes=self.smem_per_block_optin,
            max_regs_per_thread=255,
            regs_per_sm=65536,
            max_threads_per_block=1024,
            sm_count=self.sm_count,
        )


def _peaks(fp32: float, tf32: float, bf16: float, fp8: float | None) -> dict[str, float]:
    peaks = {"fp32": fp32, "tf32": tf32, "bf16": bf16, "fp16": bf16}
    if fp8 is not None:
        peaks["fp8e4m3"] = fp8
        peaks["fp8e5m2"] = fp8
    return peaks


_MB = 1024 * 1024
SFU_EXP_PER_CLOCK = 16
#: The clock (GHz) behind each kind's datasheet peaks: 1.83 for H100/H200 SXM
#: (docs/PERFORMANCE_FACTS.md §2), else the datasheet boost clock.
PEAK_CLOCK_GHZ: dict[str, float] = {
    "h100-sxm": 1.83, "h200": 1.83, "h100-pcie": 1.755, "h100-nvl": 1.785,
    "a100-80gb": 1.41, "a100-40gb": 1.41, "l40s": 2.52, "l4": 2.04,
}

DEVICES: dict[str, DeviceSpec] = {
    spec.kind: spec
    for spec in (
        DeviceSpec("h100-sxm", "H100 SXM5 80GB", (9, 0), 132, 3350.0, 50 * _MB,
                   HOPPER_SMEM_OPTIN, _peaks(67.0, 495.0, 989.0, 1979.0)),
        DeviceSpec("h100-pcie", "H100 PCIe 80GB", (9, 0), 114, 2000.0, 50 * _MB,
                   HOPPER_SMEM_OPTIN, _peaks(51.0, 378.0, 756.0, 1513.0)),
        DeviceSpec("h100-nvl", "H100 NVL 94GB", (9, 0), 132, 3900.0, 50 * _MB,
                   HOPPER_SMEM_OPTIN, _peaks(60.0, 418.0, 835.0, 1671.0)),
        DeviceSpec("h200", "H200 SXM 141GB", (9, 0), 132, 4800.0, 50 * _MB,
                   HOPPER_SMEM_OPTIN, _peaks(67.0, 495.0, 989.0, 1979.0)),
        DeviceSpec("a100-80gb", "A100 SXM 80GB", (8, 0), 108, 2039.0, 40 * _MB,
                   AMPERE_SMEM_OPTIN, _peaks(19.5, 156.0, 312.0, None)),
        DeviceSpec("a100-40gb", "A100 40GB", (8, 0), 108, 1555.0, 40 * _MB,
                   AMPERE_SMEM_OPTIN, _peaks(19.5, 156.0, 312.0, None)),
        DeviceSpec("l40s", "L40S 48GB", (8, 9), 142, 864.0, 96 * _MB,
                   ADA_SMEM_OPTIN, _peaks(91.6, 183.0, 362.0, 733.0)),
        DeviceSpec("l4", "L4 24GB", (8, 9), 58, 300.0, 48 * _MB,
                   ADA_SMEM_OPTIN, _peaks(30.3, 60.0, 121.0, 242.0)),
    )
}

# Ordered: the first pattern that matches the lower-cased device name wins.
_NAME_RULES: tuple[tuple[str, str], ...] = (
    (r"\bgh200\b", ""),  # Grace Hopper superchip: not in the table, keep its own slug
    (r"\bh200\b.*\bnvl\b", ""),  # H200 NVL: different power/peaks, not in the table
    (r"\bh200\b", "h200"),
    (r"\bh100\b.*\bnvl\b", "h100-nvl"),
    (r"\bh100\b.*\bpcie\b", "h100-pcie"),
    (r"\bh100\b", "h100-sxm"),  # "NVIDIA H100 80GB HBM3", "H100 SXM5"
    (r"\ba100\b.*\b40\s?gb\b", "a100-40gb"),
    (r"\ba100\b", "a100-80gb"),
    (r"\bl40s\b", "l40s"),
    (r"\bl4\b", "l4"),
)


def slug(name: str) -> str:
    """Lower-case, dash-separated device name: ``NVIDIA RTX A4000`` → ``nvidia-rtx-a4000``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def normalise_device_name(name: str) -> str:
    """Map a reported device name to a kind of ``DEVICES``, else to its slug.

    ``"NVIDIA H100 80GB HBM3"`` → ``"h100-sxm"``; ``"NVIDIA A100-SXM4-40GB"`` → ``"a100-40gb"``;
    ``"NVIDIA GeForce RTX 3090"`` → ``"nvidia-geforce-rtx-3090"`` (no datasheet entry).
    """
    lowered = re.sub(r"[-_]", " ", name.lower())
    for pattern, kind in _NAME_RULES:
        if re.search(pattern, lowered):
            return kind or slug(name)
    return slug(name)


def device_spec(kind: str) -> DeviceSpec | None:
    """The datasheet entry of a kind, or ``None`` (CPU, or a GPU the table does not know)."""
    return DEVICES.get(kind)


def target_limits(kind: str) -> TargetLimits:
    """Launch limits for constraints: the datasheet's for known GPUs, none for the CPU.

    An unknown GPU kind gets the most conservative limits of the table (Ada's 99 KB of shared
    memory, 255 registers per thread), so constraints never admit what a small GPU cannot run.
    """
    spec = device_spec(kind)
    if spec is not None:
        return spec.limits()
    if kind == CPU_KIND:
        return TargetLimits(kind=CPU_KIND, max_threads_per_block=None)
    return TargetLimits(kind=kind, smem_per_block_bytes=ADA_SMEM_OPTIN, max_regs_per_thread=255,
                        regs_per_sm=65536, max_threads_per_block=1024)


def known_kinds() -> list[str]:
    return [*DEVICES, CPU_KIND]
