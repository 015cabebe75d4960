"""Production lookup: the config to launch a kernel with, from tuned results, in tiers.

``best_config(kernel, problem, dtype, device_kind=None)`` answers from the database or an
exported JSON file, trying in order:

1. ``exact``: a config tuned for this very problem;
2. ``bucket``: one tuned for a problem in the same bucket (default: every dimension rounded up
   to a power of two, ``bucket="pow2"``; ``"none"`` skips the tier);
3. ``nearest``: the tuned problem nearest in log space (Σ (ln a − ln b)² over the dimensions);
4. ``default``: the ``default`` argument, else the kernel's default of an export file.

**Which device.** ``device_kind=None`` means this process's device
(``tuner.core.devices.local``: ``TUNER_DEVICE_KIND``, torch's current GPU, NVML, else ``cpu``),
or, when that found no device for certain (torch not imported yet, no NVML), the single device
kind of an export file that holds one. Serving a config tuned on another kind needs
``device_kind="any"``, and then the answer says so (``crossed`` True and a stale reason naming
both kinds).

**Never fails.** No database, an unreachable one, a missing or corrupt export: the answer is the
default (or ``None``), with one ``RuntimeWarning`` per process and source; the source is not
tried again in this process (``clear_cache()`` retries). A PostgreSQL source gets a 3-second
connect timeout, so a lookup never blocks for long.

The answer is a ``TunedConfig``: a plain dict of parameters that also says which tier served
it, for which problem and device kind it was tuned, and whether its fingerprint still matches
this process (``stale`` and ``stale_reasons``, computed on first access:
``tuner.serving.staleness``).

Each (source, kernel, dtype) is loaded once; answers are cached per process, so only the first
call for a key does I/O and the hot path is a dict lookup and a copy. The default source
(``TUNER_BEST_CONFIGS``, else the service database) is resolved once, at the first call.
Importing this module imports neither Optuna, Celery, torch nor Triton (SQLAlchemy only for a
database source).
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.core.devices.local import local_device_kind
from tuner.core.types import problem_hash

#: ``device_kind`` value that accepts a config tuned on any kind of device (the answer says so).
ANY_DEVICE = "any"
#: Seconds a PostgreSQL source may take to accept a connection.
CONNECT_TIMEOUT_S = 3

_CACHE: dict[tuple[Any, ...], TunedConfig | None] = {}
_ENTRIES: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
_FILES: dict[str, dict[str, Any]] = {}
_FAILED: dict[str, str] = {}
_SOURCE: list[str] = []
_LOCK = threading.RLock()


class TunedConfig(dict[str, Any]):
    """The parameters to launch with (a dict), and where they came from (attributes):
    ``tier``, ``problem`` and ``device_kind`` it was tuned for, its roofline ``fraction``,
    ``crossed`` (tuned on another device kind than the one asked for), and ``stale`` /
    ``stale_reasons`` (computed on first access)."""

    tier: str
    problem: dict[str, int] | None
    device_kind: str | None
    fraction: float | None
    crossed: bool
    #: The stored entry this answer came from (shared by copies: staleness is computed once).
    entry: dict[str, Any] | None
    kernel: str
    #: The identity of the kernel it was tuned for (``tuner.kernels.identity``).
    identity: str | None
    #: Why it belongs to another kernel of the same name (None: it does not).
    other_kernel: str | None

    def copy(self) -> TunedConfig:  # type: ignore[override]
        clone = TunedConfig(self)
        clone.__dict__.update(self.__dict__)
        return clone

    @property
    def stale_reasons(self) -> list[str]:
        entry = self.entry
        if entry is None:
            return []
        if "_stale_reasons" not in entry:
            from tuner.serving.staleness import stale_reasons

            printed = entry.get("fingerprint")
            reasons = stale_reasons(self.kernel, entry["device_kind"],
                                    printed if isinstance(printed, dict) else {},
                                    by_source=not str(entry.get("identity")).startswith("jit:"))
            if self.crossed:
                reasons.insert(0, f"tuned on {entry['device_kind']}, "
                                  f"this process runs on {local_device_kind()}")
            entry["_stale_reasons"] = reasons
        own = [self.other_kernel] if getattr(self, "other_kernel", None) else []
        return [*own, *entry["_stale_reasons"]]

    @property
    def stale(self) -> bool | None:
        return None if self.entry is None else bool(self.stale_reasons)


def default_source(env: Mapping[str, str] | None = None) -> str:
    """``TUNER_BEST_CONFIGS`` (an export file or a database URL), else the service database."""
    env = os.environ if env is None else env
    if env.get("TUNER_BEST_CONFIGS"):
        return env["TUNER_BEST_CONFIGS"]
    from tuner.core.settings import Settings

    return Settings.from_env(env).db_url


def _is_file_source(source: str) -> bool:
    return "://" not in source


def shown_source(source: str) -> str:
    """``source`` as messages show it: a file as given, a database URL without credentials."""
    return source if _is_file_source(source) else source.split("@")[-1]


def pow2_bucket(problem: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Every dimension rounded up to a power of two."""
    return tuple(sorted((k, 1 << max(0, int(v) - 1).bit_length()) for k, v in problem.items()))


BUCKETS: dict[str, Callable[[Mapping[str, int]], Any] | None] = {"pow2": pow2_bucket,
                                                                  "none": None}


# -- loading --------------------------------------------------------------------------------
def _read_file(source: str) -> dict[str, Any]:
    doc = _FILES.get(source)
    if doc is None:
        from tuner.serving.export import read_export_document

        doc = read_export_document(Path(source))
        _FILES[source] = doc
        if doc.get("malformed"):
            warnings.warn(f"tuner: {doc['malformed']} malformed entries of {source} ignored",
                          RuntimeWarning, stacklevel=5)
    return doc


def malformed(source: str) -> int:
    """How many entries of an export file were left out as malformed (0 for a database)."""
    return int(_FILES[source].get("malformed", 0)) if source in _FILES else 0


def stored_entries(source: str, kernel: str, dtype: str) -> list[dict[str, Any]]:
    """Every stored best config of (kernel, dtype) in ``source`` (loaded once per process).

    Raises when the source cannot be read; ``best_config`` turns that into its default."""
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


def stored_keys(source: str) -> set[tuple[str, str, str]]:
    """Every (kernel, dtype, device kind) ``source`` holds a tuned config for (``tuner best``
    tells an unknown kernel from an untuned problem with it). Raises when it cannot be read."""
    if _is_file_source(source):
        return {(e["kernel"], e["dtype"], e["device_kind"]) for e in _read_file(source)["configs"]}
    from db.repository import best as repo

    return set(_query_db(source, repo.stored_keys, set()))


def _query_db(source: str, query: Callable[[Any], Any], empty: Any) -> Any:
    """``query(session)`` on the database ``source`` (``empty`` when it has no tables yet);
    never creates a database file by reading."""
    from db.session import is_missing_tables
    from db.session import make_engine
    from db.session import session_factory
    from db.session import sqlite_path

    path = sqlite_path(source)
    if path is not None and not path.is_file():
        raise FileNotFoundError(f"no database at {path}")
    engine = make_engine(source, create_parent=False, connect_timeout_s=CONNECT_TIMEOUT_S)
    try:
        with session_factory(engine)() as session:
            return query(session)
    except Exception as exc:
        if is_missing_tables(exc):
            return empty  # nothing tuned there yet
        raise
    finally:
        engine.dispose()


def _from_db(source: str, kernel: str, dtype: str) -> list[dict[str, Any]]:
    from db.repository import best as repo

    def entries(session: Any) -> list[dict[str, Any]]:
        return [{"problem": dict(r.problem), "device_kind": r.device_kind,
                 "fraction": r.fraction, "config": dict(r.config),
                 "fingerprint": dict(r.fingerprint or {}), "identity": r.kernel_identity}
                for r in repo.best_configs_of(session, kernel, dtype)]

    return list(_query_db(source, entries, []))


def _warn_once(source: str, exc: BaseException) -> None:
    if source in _FAILED:
        return
    shown = shown_source(source)
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    _FAILED[source] = f"{type(exc).__name__}: {first}"
    warnings.warn(f"tuner: cannot read tuned configs from {shown} ({_FAILED[source]}); "
                  "serving defaults", RuntimeWarning, stacklevel=4)


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


def default_kind(source: str) -> str:
    """This process's device kind, or an export's single kind when this process's is a guess."""
    from tuner.core.devices.local import device_is_known

    if not device_is_known() and _is_file_source(source):
        kinds = {e["device_kind"] for e in _read_file(source)["configs"]}
        if len(kinds) == 1:
            return str(kinds.pop())
    return local_device_kind()


def is_builtin_name(kernel: str) -> bool:
    """A name only the service's own kernels are stored under."""
    from tuner.kernels.names import BUILTIN

    return kernel in BUILTIN or kernel.startswith(("matmul+", "recorded:", "replay"))


def by_identity(entries: list[dict[str, Any]], kernel: str, identity: str | None,
                ) -> tuple[list[dict[str, Any]], str | None]:
    """The entries that may answer for ``kernel`` of ``identity``, and why they are stale
    when they are another kernel's (``tuner.kernels.identity``): a built-in name serves the
    built-in only; a kernel that names its identity is served its own entries, else another
    version's (stale); without one, several kernels under one name are said to be."""
    builtin = is_builtin_name(kernel)
    if identity is not None and identity != "builtin":
        own = [e for e in entries if e.get("identity") == identity]
        if own or not entries or builtin:  # a file kernel is never served the built-in's
            return own, None
        return entries, "kernel source changed: tuned for another version of this kernel"
    if builtin:
        return [e for e in entries if e.get("identity") in (None, "builtin")], None
    kinds = {e.get("identity") for e in entries}
    if len(kinds) > 1:
        return entries, (f"{len(kinds)} different kernels are stored as {kernel!r}; pass "
                         "identity= (tuner.autotune does) to get your own")
    return entries, None


def _tuned(source: str, kernel: str, problem: Mapping[str, int], dtype: str,
           device_kind: str | None, bucket: str, identity: str | None = None,
           ) -> TunedConfig | None:
    """The tuned tiers' answer; raises when the source cannot be read."""
    entries, other_kernel = by_identity(stored_entries(source, kernel, dtype), kernel, identity)
    wanted = device_kind if device_kind is not None else default_kind(source)
    if wanted != ANY_DEVICE:
        entries = [e for e in entries if e["device_kind"] == wanted]
    chosen = _choose(entries, problem, BUCKETS[bucket])
    if chosen is None:
        return None
    tier, entry = chosen
    answer = TunedConfig(entry["config"])
    answer.tier, answer.problem, answer.kernel = tier, dict(entry["problem"]), kernel
    answer.device_kind, answer.fraction = entry["device_kind"], entry["fraction"]
    answer.crossed = wanted == ANY_DEVICE and entry["device_kind"] != local_device_kind()
    answer.entry, answer.identity = entry, entry.get("identity")
    answer.other_kernel = other_kernel
    return answer


def _answer(source: str, kernel: str, problem: Mapping[str, int], dtype: str,
            device_kind: str | None, bucket: str, default: Mapping[str, Any] | None,
            identity: str | None = None) -> TunedConfig | None:
    if bucket not in BUCKETS:
        raise ValueError(f"unknown bucket {bucket!r} (choose from {', '.join(BUCKETS)})")
    readable = source not in _FAILED
    if readable:
        try:
            answer = _tuned(source, kernel, problem, dtype, device_kind, bucket, identity)
            if answer is not None:
                return answer
            if default is None and _is_file_source(source):
                default = _read_file(source).get("defaults", {}).get(kernel)
        except Exception as exc:  # production must keep running: the default serves
            _warn_once(source, exc)
    if default is None:
        return None
    answer = TunedConfig(default)
    answer.tier, answer.problem, answer.device_kind, answer.fraction = "default", None, None, None
    answer.crossed, answer.entry, answer.kernel = False, None, kernel
    answer.identity, answer.other_kernel = None, None
    return answer


def best_config(kernel: str, problem: Mapping[str, int], dtype: str,
                device_kind: str | None = None, *, source: str | None = None,
                bucket: str = "pow2", default: Mapping[str, Any] | None = None,
                identity: str | None = None) -> TunedConfig | None:
    """The config to use (see the module docstring), or ``None`` when no tier has one.

    ``problem`` maps dimension names to sizes (``{"M": 512, "N": 512, "K": 512}``);
    ``device_kind``: None (this process's device), a kind, or ``"any"``; ``identity``: the
    kernel's (``tuner.kernels.identity.jit_identity``), which picks its own entries among
    same-named kernels (``by_identity``). Never raises for an unreadable source; raises
    ``ValueError`` for an unknown ``bucket`` (a programming error).
    """
    key = (source, kernel, tuple(sorted(problem.items())), dtype, device_kind, bucket,
           None if default is None else tuple(sorted(default.items())), identity)
    try:
        cached = _CACHE[key]
    except KeyError:
        with _LOCK:
            if not _SOURCE:
                _SOURCE.append(default_source())
            src = source if source is not None else _SOURCE[0]
            cached = _answer(src, kernel, problem, dtype, device_kind, bucket, default,
                             identity)
            _CACHE[key] = cached
    return None if cached is None else cached.copy()


def source_error(source: str) -> str | None:
    """Why ``source`` could not be read in this process (None: it could, or was not tried)."""
    return _FAILED.get(source)


def clear_cache() -> None:
    """Forget every answer, loaded source, failure and the resolved default source."""
    from tuner.core.devices import local as local_device
    from tuner.serving import staleness

    with _LOCK:
        _CACHE.clear()
        _ENTRIES.clear()
        _FILES.clear()
        _FAILED.clear()
        _SOURCE.clear()
    local_device.clear()
    staleness.clear()
