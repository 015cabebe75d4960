"""The roofline chart of a profile: each operator group at (arithmetic intensity, achieved
FLOP/s) under the roofs of the device that ran it, sized by its share of the program's time,
so the big, low points are where the saving is."""

from __future__ import annotations

from pathlib import Path

from tuner.advisor.profile import Profile
from tuner.charts import Point
from tuner.charts import roofline_png


def roofline_chart(profile: Profile, peaks: dict[str, float], bandwidth_gbps: float,
                   path: Path) -> int:
    """Write the chart to ``path``; returns the number of operator groups plotted."""
    points = [Point(g.flops / g.min_bytes, g.flops / (g.time_ms / 1e3) / 1e12,
                    g.op.removeprefix("aten::"), 20 + 600 * g.share)
              for g in profile.groups
              if g.flops and g.min_bytes and g.time_ms > 0 and g.kind != "free"]
    return roofline_png(points, (peaks, bandwidth_gbps), path,
                        f"{profile.program} on {profile.device_kind} (size: share of time)")
