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

import math
import statistics
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from search_spaces import Config
from search_spaces import canonical_json
from tuner.core.types import DEFAULT_TRANSFER


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


def measured_prior(results: Iterable[tuple[Config, float | None]],
                   ) -> Callable[[Config], float] | None:
    """A search prior from measured results of the same kernel and problem on another device:
    ``(config, roofline fraction or None for a failure)`` pairs. The prior of a measured config
    is its log fraction relative to the best there (0 for the best; ``-inf`` for a failure, the
    search puts those below every other config); a config never measured there gets the median
    of the measured ones (no opinion). Several results for one config: the best counts.
    ``None`` when nothing succeeded."""
    best: dict[str, float] = {}
    for config, fraction in results:
        key = canonical_json(config)
        value = math.log(fraction) if fraction is not None and fraction > 0 \
            and math.isfinite(fraction) else -math.inf
        best[key] = max(best.get(key, -math.inf), value)
    finite = [v for v in best.values() if math.isfinite(v)]
    if not finite:
        return None
    top = max(finite)
    typical = statistics.median(finite) - top

    def prior(config: Config) -> float:
        value = best.get(canonical_json(config))
        return typical if value is None else value - top

    return prior
