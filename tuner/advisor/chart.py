"""The roofline chart of a profile: each operator group at (arithmetic intensity, achieved
FLOP/s) under the roofs of the device that ran it, as a PNG (matplotlib, no display needed).

Achieved FLOP/s = the group's FLOPs / its measured time; the roofs are the memory slope
(bandwidth × intensity) and the compute ceiling of the dtype. Points are sized by their share
of the program's time, so the big, low ones are where the saving is.
"""

from __future__ import annotations

from pathlib import Path

from tuner.advisor.profile import Profile


def roofline_chart(profile: Profile, peaks: dict[str, float], bandwidth_gbps: float,
                   path: Path) -> int:
    """Write the chart to ``path``; returns the number of operator groups plotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    points = [g for g in profile.groups
              if g.flops and g.min_bytes and g.time_ms > 0 and g.kind != "free"]
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    intensities = np.logspace(-2, 4, 200)
    memory = bandwidth_gbps * 1e9 * intensities / 1e12
    if peaks:
        memory = np.minimum(memory, max(peaks.values()))
    ax.plot(intensities, memory, color="black", lw=1,
            label=f"memory {bandwidth_gbps:.0f} GB/s")
    for dtype, peak in sorted(peaks.items()):
        ax.axhline(peak, ls="--", lw=0.8, color="grey")
        ax.text(intensities[0], peak * 1.05, f"{dtype} {peak:.3g} TFLOP/s", fontsize=7)
    for g in points:
        assert g.flops is not None and g.min_bytes is not None
        x = g.flops / g.min_bytes
        y = g.flops / (g.time_ms / 1e3) / 1e12
        ax.scatter([x], [y], s=20 + 600 * g.share, alpha=0.6)
        ax.annotate(g.op.removeprefix("aten::"), (x, y), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(f"{profile.program} on {profile.device_kind} (size: share of time)")
    ax.legend(loc="lower right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return len(points)
