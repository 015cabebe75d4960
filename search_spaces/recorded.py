"""Recorded tuning spaces: Kernel Tuner cache files as search spaces.

A cache file (``benchmarks/data/replay/README.md``) declares a grid (``tune_params``, in
``tune_params_keys`` order) and records one entry per measured point, keyed ``"v1,v2,…"``.
Grid points absent from the cache violated the kernel's restrictions: they are statically
invalid here too (the ``recorded_point`` constraint). Files written incrementally may lack their
closing braces; the loader closes them.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from search_spaces.constraints import Constraint
from search_spaces.constraints import register
from search_spaces.context import Context
from search_spaces.params import Categorical
from search_spaces.params import Choice
from search_spaces.params import Param
from search_spaces.space import SearchSpace

#: Kernel Tuner failure strings, as they appear in ``time``.
FAILURE_STRINGS = ("RuntimeFailedConfig", "CompilationFailedConfig", "InvalidConfig")


@dataclass(frozen=True)
class Recording:
    """One parsed cache file. ``entries`` maps the cache key to the recorded entry."""

    path: Path
    digest: str
    device_name: str
    kernel_name: str
    problem_size: tuple[int, ...]
    keys: tuple[str, ...]
    grid: Mapping[str, tuple[Any, ...]]
    entries: Mapping[str, Mapping[str, Any]]

    def key_of(self, config: Mapping[str, Any]) -> str:
        return ",".join(str(config[k]) for k in self.keys)

    def best_time_ms(self) -> float:
        """Fastest recorded successful ``time`` (Kernel Tuner's mean) of the whole space."""
        times = [e["time"] for e in self.entries.values() if _is_time(e.get("time"))]
        if not times:
            raise ValueError(f"{self.path} records no successful configuration")
        return float(min(times))

    def best_median_ms(self) -> float:
        """Fastest ``median_ms`` of a successful entry of the whole space."""
        medians = [median_ms(e) for e in self.entries.values() if _is_time(e.get("time"))]
        found = [m for m in medians if m is not None]
        if not found:
            raise ValueError(f"{self.path} records no successful configuration")
        return min(found)

    def problem(self) -> dict[str, int]:
        return {f"p{i}": int(v) for i, v in enumerate(self.problem_size)}


def _is_time(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def recorded_samples(entry: Mapping[str, Any]) -> list[float]:
    """The raw repetitions (ms) of a successful entry: its ``times``, or its ``time`` alone
    when the file kept no repetitions; empty for a failure."""
    if not _is_time(entry.get("time")):
        return []
    times = entry.get("times")
    if isinstance(times, list) and times and all(_is_time(t) for t in times):
        return [float(t) for t in times]
    return [float(entry["time"])]


def median_ms(entry: Mapping[str, Any]) -> float | None:
    """The median (ms) of a successful entry's repetitions (``None`` for a failure): the
    statistic every backend reports, where ``time`` is Kernel Tuner's mean."""
    samples = sorted(recorded_samples(entry))
    if not samples:
        return None
    pos = 0.5 * (len(samples) - 1)  # the interpolation of ``tuner.measure.timing.quantile``
    lo = int(pos)
    hi = min(lo + 1, len(samples) - 1)
    return samples[lo] + (samples[hi] - samples[lo]) * (pos - lo)


def _parse(text: str) -> dict[str, Any]:
    """Parse a cache file, closing a truncated one (Kernel Tuner appends entries)."""
    try:
        return dict(json.loads(text))
    except ValueError:
        pass
    body = text.rstrip().rstrip(",")
    for suffix in ("}", "}}", "}}}", "\n}\n}"):
        try:
            return dict(json.loads(body + suffix))
        except ValueError:
            continue
    # Cut back to the last complete entry, then close.
    cut = body.rfind("},")
    if cut > 0:
        with contextlib.suppress(ValueError):
            return dict(json.loads(body[: cut + 1] + "}}"))
    raise ValueError("not a Kernel Tuner cache file (unparseable JSON)")


_CACHE: dict[str, Recording] = {}


#: The largest recording read, packed or not (the shipped ones are a few MiB).
MAX_RECORDING_BYTES = 256 * 2**20


def load_recording(path: str | Path) -> Recording:
    """Load (once per process) and validate a Kernel Tuner cache file, gzip or plain."""
    p = Path(path).expanduser().resolve()
    if not p.is_file():  # /dev/zero, a FIFO, a folder: never read until memory runs out
        raise ValueError(f"{p} is not a regular file")
    if p.stat().st_size > MAX_RECORDING_BYTES:
        raise ValueError(f"{p} is larger than {MAX_RECORDING_BYTES >> 20} MiB")
    raw = p.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()[:16]
    if digest in _CACHE:
        return _CACHE[digest]
    if raw[:2] == b"\x1f\x8b":
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as unzipped:
            raw = unzipped.read(MAX_RECORDING_BYTES + 1)
        if len(raw) > MAX_RECORDING_BYTES:
            raise ValueError(f"{p} unpacks to more than {MAX_RECORDING_BYTES >> 20} MiB")
    text = raw.decode("utf-8")
    data = _parse(text)
    for field in ("tune_params_keys", "tune_params", "cache"):
        if field not in data:
            raise ValueError(f"{p} is not a Kernel Tuner cache file: no {field!r}")
    keys = tuple(str(k) for k in data["tune_params_keys"])
    grid = {k: tuple(data["tune_params"][k]) for k in keys}
    size = data.get("problem_size", [])
    rec = Recording(
        path=p, digest=digest, device_name=_device_name(data, p),
        kernel_name=str(data.get("kernel_name", p.name)),
        problem_size=tuple(int(x) for x in (size if isinstance(size, list) else [size])),
        keys=keys, grid=grid, entries=dict(data["cache"]),
    )
    _CACHE[digest] = rec
    return rec


def _device_name(data: dict[str, Any], path: Path) -> str:
    """The recorded GPU's name; a cache that leaves it blank (some public ones do) is named
    after its file, so two unnamed recordings are never taken for one device kind."""
    name = str(data.get("device_name") or "").strip()
    return name or f"unnamed GPU of {path.name}"


def registered_recording(digest: str) -> Recording:
    if digest not in _CACHE:
        raise LookupError(f"recording {digest} is not loaded in this process")
    return _CACHE[digest]


@register("recorded_point", "the recording has no entry for this grid point (a restriction)")
def recorded_point(config: Mapping[str, Any], ctx: Context, *, recording: str) -> bool:
    rec = registered_recording(recording)
    return rec.key_of(config) in rec.entries


def _param(name: str, values: tuple[Any, ...]) -> Param:
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return Choice(name, tuple(values))
    return Categorical(name, tuple(values))


def recorded_space(rec: Recording) -> SearchSpace:
    """The declared grid as a space; unrecorded points are invalid via ``recorded_point``."""
    return SearchSpace(
        name=f"recorded:{rec.kernel_name}",
        params=tuple(_param(k, rec.grid[k]) for k in rec.keys),
        constraints=(Constraint.of("recorded_point", recording=rec.digest),),
    )
