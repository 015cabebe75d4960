"""Transfer: start a new search from the best configs already found for related problems.

The database keeps the best measured config of every (kernel, problem, dtype, device kind) it
has tuned. A new job on the same kernel and dtype starts from the ``limit`` most related of
them: the same device kind before other kinds, then the nearest problem shape (distance: the sum
over shared dimensions of ``|log2(a / b)|``, so 4096 is as far from 2048 as 2048 is from 1024).
The default search measures those first when they are valid for the new problem; it skips the
rest, so a stale or foreign config costs no measurement.

A new *device kind* also starts from every stored result of the same kernel, problem and
dtype measured on other device kinds (``measured_prior``): the search's prior, so it starts
from that GPU's best configs and its model learns only how this GPU differs.

Measured: ``benchmarks/transfer.py`` (shapes, predicted times) and
``benchmarks/search_transfer.py`` (GPUs, recorded times) — README, "Search quality".
"""

from __future__ import annotations

import difflib
import json
import math
import statistics
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from search_spaces import Config
from search_spaces import SearchSpace
from search_spaces import canonical_json
from tuner.core.types import DEFAULT_TRANSFER

#: Least ``difflib`` similarity for two differently spelt parameter names to match.
NAME_CUTOFF = 0.6


@dataclass(frozen=True)
class StoredBest:
    """One stored best config: the problem it was tuned for, where, and the config."""

    problem: Mapping[str, int]
    device_kind: str
    config: Config


def shape_distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    """Sum over shared dimensions of ``|log2(a / b)|``; ``inf`` when no dimension is shared."""
    shared = [k for k in a if k in b and a[k] > 0 and b[k] > 0]
    if not shared:
        return math.inf
    return sum(abs(math.log2(a[k] / b[k])) for k in shared)


def transfer_configs(stored: Iterable[StoredBest], problem: Mapping[str, int],
                     device_kind: str, limit: int = DEFAULT_TRANSFER) -> list[Config]:
    """The configs to start from, most related first, distinct, at most ``limit``."""
    ranked = sorted(stored, key=lambda s: (s.device_kind != device_kind,
                                           shape_distance(s.problem, problem)))
    out: list[Config] = []
    seen: set[str] = set()
    for s in ranked:
        if len(out) >= limit:
            break
        key = canonical_json(s.config)
        if key not in seen:
            seen.add(key)
            out.append(dict(s.config))
    return out


def stored_best_rows(rows: Iterable[Any]) -> list[StoredBest]:
    """``StoredBest`` from ``tuner_best_configs`` rows (anything with ``problem``,
    ``device_kind`` and ``config``)."""
    return [StoredBest(dict(r.problem), str(r.device_kind), dict(r.config)) for r in rows]


def normalised_name(name: str) -> str:
    """A parameter name compared across spaces: lower case, letters and digits only
    (``BLOCK_SIZE_M``, ``block_size_m`` and ``blockSizeM`` are one name)."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def match_names(source: Iterable[str], target: Iterable[str]) -> dict[str, str]:
    """Source parameter name -> target parameter name: equal normalised names first, then the
    closest remaining normalised names (``difflib`` ratio >= NAME_CUTOFF), one to one;
    a name without a match is left out."""
    left = sorted(set(source))
    free = {normalised_name(t): t for t in sorted(set(target))}
    out: dict[str, str] = {}
    for s in left:
        if normalised_name(s) in free:
            out[s] = free.pop(normalised_name(s))
    for s in left:
        if s in out:
            continue
        close = difflib.get_close_matches(normalised_name(s), list(free), 1, NAME_CUTOFF)
        if close:
            out[s] = free.pop(close[0])
    return out


def nearest_value(value: Any, choices: Iterable[Any]) -> Any:
    """The choice nearest ``value``: numbers by ratio when both are positive (64 is as near
    32 as 128), else by difference; anything else only when equal (``None``: no match)."""
    options = list(choices)
    if value in options:
        return value
    if not _number(value):
        return None
    numbers = [c for c in options if _number(c)]
    if not numbers:
        return None

    def distance(c: Any) -> float:
        if value > 0 and c > 0:
            return abs(math.log(c / value))
        return float(abs(c - value)) + 1e6  # after every positive neighbour

    return min(numbers, key=distance)


def map_config(config: Config, space: SearchSpace) -> Config | None:
    """``config`` (of another space) as a config of ``space``: names by ``match_names``, each
    value the nearest one ``space`` declares (``nearest_value``); ``None`` when a parameter of
    ``space`` that is active gets no value. Validity for a problem is the caller's check."""
    names = match_names(config, [p.name for p in space.params])
    given = {t: config[s] for s, t in names.items()}
    out: Config = {}
    for p in space.params:
        if not p.active(out):
            continue
        value = nearest_value(given[p.name], p.values()) if p.name in given else None
        if value is None:
            return None
        out[p.name] = value
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: How ``measured_prior`` treats a searched value the source never measured: ``"nearest"`` its
#: nearest measured value's figure; ``"no-part"`` the parameter plays no part for that config
#: (its best value counts, as for a parameter the source lacks).
UNMEASURED = ("nearest", "no-part")


class MeasuredPrior:
    """A prior from measured results (``measured_prior``) that knows the grid its source
    measured: the values of each of the source's parameters."""

    def __init__(self, value: Callable[[Config], float], grid: Mapping[str, list[Any]]) -> None:
        self._value, self.grid = value, grid

    def __call__(self, config: Config) -> float:
        return self._value(config)

    def holds(self, space: SearchSpace) -> bool:
        """Whether the source measured, under the same name (``normalised_name``), every value
        of every parameter of ``space`` that has more than one: a prior used without mapping
        anything to a nearest value."""
        names = {normalised_name(k): k for k in self.grid}
        for p in space.params:
            values = list(p.values())
            source = names.get(normalised_name(p.name))
            if source is None and len(values) > 1:
                return False
            if source is not None and not set(values) <= set(self.grid[source]):
                return False
        return True


def measured_prior(results: Iterable[tuple[Config, float | None]],
                   unmeasured: str = "nearest") -> MeasuredPrior | None:
    """A search prior from measured results of the same kernel and problem on another device:
    ``(config, roofline fraction or None for a failure)`` pairs. The prior of a config is the
    log fraction, relative to the best there, of the source config it maps to (0 for the best;
    ``-inf`` for a failure, the search puts those below every other config); a config with no
    measured counterpart gets the median of the measured ones (no opinion). Several results for
    one config: the best counts. ``None`` when nothing succeeded.

    The source's space may differ from the one searched: a config searched here is mapped onto
    the source's grid (``match_names`` for the parameter names, ``nearest_value`` for each
    value among those the source measured), so a re-gridded or renamed space keeps its prior;
    a parameter the source lacks plays no part, and so does, with ``unmeasured="no-part"``, a
    parameter whose value here the source never measured (``UNMEASURED``)."""
    if unmeasured not in UNMEASURED:
        raise ValueError(f"unmeasured must be one of {', '.join(UNMEASURED)}")
    measured = list(results)
    source_names = sorted({k for config, _ in measured for k in config})
    best: dict[str, float] = {}
    for config, fraction in measured:
        key = canonical_json(config)
        value = math.log(fraction) if fraction is not None and fraction > 0 \
            and math.isfinite(fraction) else -math.inf
        best[key] = max(best.get(key, -math.inf), value)
    finite = [v for v in best.values() if math.isfinite(v)]
    if not finite:
        return None
    top = max(finite)
    typical = statistics.median(finite) - top
    grid: dict[str, list[Any]] = {}
    for config, _ in measured:
        for k, v in config.items():
            if v not in grid.setdefault(k, []):
                grid[k] = [*grid[k], v]
    mapped: dict[tuple[str, ...], dict[str, str]] = {}  # target names -> their source names
    projected: dict[tuple[str, ...], dict[str, float]] = {}  # source names -> best by them

    def translated(config: Config) -> float | None:
        names = tuple(sorted(config))
        if names not in mapped:
            mapped[names] = {t: s for s, t in match_names(source_names, names).items()}
        to_source = mapped[names]
        if unmeasured == "no-part":
            to_source = {k: v for k, v in to_source.items() if config[k] in grid[v]}
        if not to_source:
            return None
        kept = tuple(sorted(to_source.values()))
        if kept not in projected:  # a parameter the target lacks: its best value counts
            table: dict[str, float] = {}
            for key, value in best.items():
                part = canonical_json({k: v for k, v in json.loads(key).items() if k in kept})
                table[part] = max(table.get(part, -math.inf), value)
            projected[kept] = table
        out = {to_source[k]: nearest_value(v, grid[to_source[k]])
               for k, v in config.items() if k in to_source}
        return None if None in out.values() else projected[kept].get(canonical_json(out))

    def prior(config: Config) -> float:
        value = best.get(canonical_json(config))
        if value is None:
            value = translated(config)
        return typical if value is None else value - top

    return MeasuredPrior(prior, grid)
