"""Production lookup: the config to launch a kernel with, from tuned results, in tiers.

``best_config(kernel, problem, dtype, device_kind=None)`` answers from the database or an
exported JSON file, trying in order:

1. ``exact``: a config tuned for this very problem;
2. ``bucket``: one tuned for a problem in the same bucket (default: every dimension rounded up
   to a power of two, ``bucket="pow2"``; ``"none"`` skips the tier);
3. ``nearest``: the tuned problem nearest in log space (Σ (ln a − ln b)² over the dimensions);
4. ``default``: the ``default`` argument, else the kernel's default of an export file.

With ``device_kind=None`` the best entry of any kind serves. The answer is a ``TunedConfig``:
a plain dict of parameters that also says which tier served it, for which problem it was
tuned, and whether its fingerprint still matches this process (``stale`` and the reasons:
another Triton or torch version, a changed kernel source file).

Each (source, kernel, dtype) is loaded once; answers are cached per process, so only the first
call for a key does I/O and the hot path is a dict lookup and a copy. Importing this module
imports neither Optuna, Celery, torch nor Triton (SQLAlchemy only for a database source).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import os
import threading
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.core.types import problem_hash

_CACHE: dict[tuple[Any, ...], TunedConfig | None] = {}
_ENTRIES: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
_FILES: dict[str, dict[str, Any]] = {}
_LOCK = threading.Lock()


class TunedConfig(dict[str, Any]):
    """The parameters to launch with (a dict), and where they came from (attributes)."""

    tier: str
    problem: dict[str, int] | None
    device_kind: str | None
    fraction: float | None
    stale: bool | None
    stale_reasons: list[str]

    def copy(self) -> TunedConfig:  # type: ignore[override]
        clone = TunedConfig(self)
        clone.__dict__.update(self.__dict__)
        return clone


def default_source(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("TUNER_BEST_CONFIGS"):
        return env["TUNER_BEST_CONFIGS"]
    from tuner.core.settings import Settings

    return Settings.from_env(env).db_url


def _is_file_source(source: str) -> bool:
    return "://" not in source


def pow2_bucket(problem: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Every dimension rounded up to a power of two."""
    return tuple(sorted((k, 1 << max(0, int(v) - 1).bit_length()) for k, v in problem.items()))


BUCKETS: dict[str, Callable[[Mapping[str, int]], Any] | None] = {"pow2": pow2_bucket,
                                                                  "none": None}


# -- loading --------------------------------------------------------------------------------
def _read_file(source: str) -> dict[str, Any]:
    doc = _FILES.get(source)
    if doc is None:
        from tuner.export import read_export_document

        doc = read_export_document(Path(source))
        _FILES[source] = doc
    return doc


def stored_entries(source: str, kernel: str, dtype: str) -> list[dict[str, Any]]:
    """Every stored best config of (kernel, dtype) in ``source`` (loaded once per process)."""
    key = (source, kernel, dtype)
    if key in _ENTRIES:
        return _ENTRIES[key]
    if _is_file_source(source):
        found = [e for e in _read_file(source)["configs"]
                 if e["kernel"] == kernel and e["dtype"] == dtype]
    else:
        found = _from_db(source, kernel, dtype)
    _ENTRIES[key] = found
    return found


def _from_db(source: str, kernel: str, dtype: str) -> list[dict[str, Any]]:
    from db.repository import best as repo
    from db.session import is_missing_tables
    from db.session import make_engine
    from db.session import session_factory

    engine = make_engine(source, create_parent=False)
    try:
        with session_factory(engine)() as session:
            rows = repo.best_configs_of(session, kernel, dtype)
            return [{"problem": dict(r.problem), "device_kind": r.device_kind,
                     "fraction": r.fraction, "config": dict(r.config),
                     "fingerprint": dict(r.fingerprint or {})} for r in rows]
    except Exception as exc:
        if is_missing_tables(exc):
            return []  # nothing tuned there yet
        raise
    finally:
        engine.dispose()


# -- fingerprints ---------------------------------------------------------------------------
_VERSIONS: dict[str, str | None] = {}


def _version(package: str) -> str | None:
    if package not in _VERSIONS:
        try:
            _VERSIONS[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            _VERSIONS[package] = None
    return _VERSIONS[package]


def _kernel_file(kernel: str) -> Path | None:
    """The file whose hash the service stored for a built-in kernel (found, not imported)."""
    from tuner.kernels.names import builtin_module

    module = builtin_module(kernel)
    if module is None:
        return None
    spec = importlib.util.find_spec(module)
    return Path(spec.origin) if spec and spec.origin else None


def stale_reasons(kernel: str, fingerprint: Mapping[str, Any]) -> list[str]:
    """Why a stored fingerprint no longer matches this process (empty: it matches)."""
    reasons = []
    for package in ("triton", "torch"):
        stored, here = fingerprint.get(package), _version(package)
        if stored and here and str(stored).split("+")[0] != here.split("+")[0]:
            reasons.append(f"{package} {stored} → {here}")
    path = _kernel_file(kernel)
    stored_hash = fingerprint.get("kernel_source_hash")
    if path is not None and stored_hash and path.is_file():
        from search_spaces.canonical import stable_hash

        if stable_hash(path.read_text()) != stored_hash:
            reasons.append(f"kernel source {path.name} changed")
    return reasons


# -- tiers ----------------------------------------------------------------------------------
def _distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    return sum((math.log(max(1, a[k])) - math.log(max(1, b[k]))) ** 2 for k in a)


def _choose(entries: list[dict[str, Any]], problem: Mapping[str, int],
            bucket: Callable[[Mapping[str, int]], Any] | None,
            ) -> tuple[str, dict[str, Any]] | None:
    phash = problem_hash(problem)
    same_dims = [e for e in entries if set(e["problem"]) == set(problem)]
    exact = [e for e in same_dims if problem_hash(e["problem"]) == phash]
    if exact:
        return "exact", max(exact, key=lambda e: e["fraction"])
    if bucket is not None:
        key = bucket(problem)
        near = [e for e in same_dims if bucket(e["problem"]) == key]
        if near:
            return "bucket", min(near, key=lambda e: (_distance(problem, e["problem"]),
                                                      -e["fraction"]))
    if same_dims:
        return "nearest", min(same_dims, key=lambda e: (_distance(problem, e["problem"]),
                                                        -e["fraction"]))
    return None


def _answer(source: str, kernel: str, problem: Mapping[str, int], dtype: str,
            device_kind: str | None, bucket: str, default: Mapping[str, Any] | None,
            ) -> TunedConfig | None:
    if bucket not in BUCKETS:
        raise ValueError(f"unknown bucket {bucket!r} (choose from {', '.join(BUCKETS)})")
    entries = stored_entries(source, kernel, dtype)
    if device_kind is not None:
        entries = [e for e in entries if e["device_kind"] == device_kind]
    chosen = _choose(entries, problem, BUCKETS[bucket])
    if chosen is not None:
        tier, entry = chosen
        answer = TunedConfig(entry["config"])
        answer.tier, answer.problem = tier, dict(entry["problem"])
        answer.device_kind, answer.fraction = entry["device_kind"], entry["fraction"]
        answer.stale_reasons = stale_reasons(kernel, entry.get("fingerprint") or {})
        answer.stale = bool(answer.stale_reasons)
        return answer
    if default is None and _is_file_source(source):
        default = _read_file(source).get("defaults", {}).get(kernel)
    if default is None:
        return None
    answer = TunedConfig(default)
    answer.tier, answer.problem, answer.device_kind, answer.fraction = "default", None, None, None
    answer.stale, answer.stale_reasons = None, []
    return answer


def best_config(kernel: str, problem: Mapping[str, int], dtype: str,
                device_kind: str | None = None, *, source: str | None = None,
                bucket: str = "pow2", default: Mapping[str, Any] | None = None,
                ) -> TunedConfig | None:
    """The config to use (see the module docstring), or ``None`` when no tier has one.

    ``problem`` maps dimension names to sizes (``{"M": 512, "N": 512, "K": 512}``).
    """
    src = source if source is not None else default_source()
    key = (src, kernel, tuple(sorted(problem.items())), dtype, device_kind, bucket,
           None if default is None else tuple(sorted(default.items())))
    try:
        cached = _CACHE[key]
    except KeyError:
        with _LOCK:
            cached = _answer(src, kernel, problem, dtype, device_kind, bucket, default)
            _CACHE[key] = cached
    return None if cached is None else cached.copy()


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()
        _ENTRIES.clear()
        _FILES.clear()
