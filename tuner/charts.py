"""Charts as PNG files (matplotlib, no display): the roofline of a set of measured points, and
a search's history. Used by the study notes, ``tuner report`` and ``tuner profile --chart``.

Units: intensity in FLOP/byte, throughput in TFLOP/s, bandwidth in GB/s, peaks in TFLOP/s.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATUS_COLOURS = {"ok": "tab:blue", "best": "tab:red"}


@dataclass(frozen=True)
class Point:
    """One measured thing on a roofline chart."""

    intensity: float
    tflops: float
    label: str = ""
    size: float = 30.0
    colour: str = "tab:blue"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def device_ceilings(device_kind: str | None, measured: Mapping[str, Any] | None = None,
                    ) -> tuple[dict[str, float], float] | None:
    """(peak TFLOP/s by dtype, GB/s): the datasheet of a GPU kind, else the ``measured``
    ceilings (``{"tflops": {dtype: …}, "bandwidth_gbps": …}``, as a worker measured and each
    trial stores them: the roof its trials were scored against); None when neither is known.
    Nothing is measured here."""
    from tuner.core.devices.datasheets import device_spec

    spec = device_spec(device_kind or "")
    if spec is not None:
        return dict(spec.tflops), spec.bandwidth_gbps
    if measured and measured.get("tflops") and measured.get("bandwidth_gbps"):
        return ({k: float(v) for k, v in measured["tflops"].items()},
                float(measured["bandwidth_gbps"]))
    return None


def stored_ceilings(trials: Sequence[Any]) -> dict[str, Any] | None:
    """The measured ceilings stored with the first of ``trials`` (rows of ``tuner_trials``)
    that has them: the worker's calibration its trials were scored against."""
    for t in trials:
        ceilings = (t.provenance or {}).get("ceilings")
        if ceilings:
            return dict(ceilings)
    return None


def roof_dtype(dtype: str | None, peaks: Mapping[str, float]) -> str | None:
    """The key of ``peaks`` that bounds a job in ``dtype`` (``fp8e4m3`` → ``fp8``), if any."""
    if not dtype:
        return None
    if dtype in peaks:
        return dtype
    return next((k for k in peaks if k.startswith(dtype[:3])), None)


def roofline_png(points: Sequence[Point], ceilings: tuple[Mapping[str, float], float] | None,
                 path: Path, title: str, dtype: str | None = None) -> int:
    """Points under the memory slope and compute ceilings; returns the points drawn. With
    ``dtype`` (the job's), the slope meets that dtype's ceiling — the roof its trials were
    scored against — drawn solid; the other dtypes' ceilings are drawn faint for reference."""
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    drawn = [p for p in points if p.intensity > 0 and p.tflops > 0]
    xs = [p.intensity for p in drawn] or [1.0]
    low, high = min([*xs, 0.1]) / 3, max([*xs, 1000.0]) * 3
    intensities = np.logspace(np.log10(low), np.log10(high), 200)
    if ceilings is not None:
        peaks, bandwidth = ceilings
        memory = bandwidth * 1e9 * intensities / 1e12
        own = roof_dtype(dtype, peaks)
        if peaks:
            memory = np.minimum(memory, peaks[own] if own else max(peaks.values()))
        ax.plot(intensities, memory, color="black", lw=1, label=f"memory {bandwidth:.0f} GB/s")
        for name, peak in sorted(peaks.items()):
            mine = name == own
            ax.axhline(peak, ls="-" if mine else "--", lw=1.0 if mine else 0.6,
                       color="black" if mine else "lightgrey")
            ax.text(low, peak * 1.05, f"{name} {peak:.3g} TFLOP/s" + (" (this job)" if mine
                                                                       else ""), fontsize=7)
    for p in drawn:
        ax.scatter([p.intensity], [p.tflops], s=p.size, alpha=0.6, color=p.colour)
        if p.label:
            ax.annotate(p.label, (p.intensity, p.tflops), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(title, fontsize=10)
    if ceilings is not None:
        ax.legend(loc="lower right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return len(drawn)


def history_png(series: Mapping[str, Sequence[float | None]], path: Path, title: str) -> None:
    """Per problem: each measured trial's fraction (dots) and the best so far (line)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4), dpi=110)
    for name, fractions in series.items():
        best, line = 0.0, []
        for i, f in enumerate(fractions):
            if f is not None:
                ax.scatter([i], [f], s=10, alpha=0.5)
                best = max(best, f)
            line.append(best)
        ax.plot(range(len(line)), line, lw=1.5, label=name)
    ax.set_xlabel("measured trial (in order)")
    ax.set_ylabel("roofline fraction")
    ax.set_title(title, fontsize=10)
    if series:
        ax.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


#: Colours of the timeline's kinds of time (``tuner.core.device_time.segments``).
TIMELINE_COLOURS = {"busy": "tab:green", "compile": "tab:orange", "pool compile": "tab:blue"}


def timeline_png(pieces: Sequence[tuple[str, float, float, str]], path: Path,
                 title: str) -> int:
    """One row per device (busy measuring in green, compiling on the device in orange; the
    white between is idle) and one per compile pool (blue), over seconds since the first
    piece; returns how many pieces were drawn."""
    plt = _pyplot()
    rows = sorted({row for row, *_ in pieces})
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.45 * max(1, len(rows))), dpi=110)
    t0 = min((start for _, start, _, _ in pieces), default=0.0)
    for kind, colour in TIMELINE_COLOURS.items():
        for i, row in enumerate(rows):
            bars = [(start - t0, end - start) for r, start, end, k in pieces
                    if r == row and k == kind and end > start]
            if bars:
                ax.broken_barh(bars, (i - 0.35, 0.7), facecolors=colour, label=kind,
                               edgecolor="white", linewidth=0.5)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if unique:
        ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper right")
    ax.set_yticks(range(len(rows)), [r[-40:] for r in rows], fontsize=7)
    ax.set_xlabel("seconds since the job's first compile or trial")
    ax.set_title(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return len(pieces)
