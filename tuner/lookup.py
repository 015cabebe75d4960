"""Production lookup: the best stored config for (kernel, problem, dtype, device kind).

``best_config`` answers from the database or from an exported JSON file and caches answers in
the process, so only the first call for a key does I/O. It imports neither Optuna, Celery,
torch nor Triton (SQLAlchemy only when the source is a database).

The source is, in order: the ``source`` argument (a database URL or a ``.json`` export), the
``TUNER_BEST_CONFIGS`` environment variable (an export file), the service database
(``TUNER_DB_URL`` or the default SQLite file).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.types import problem_hash

_CACHE: dict[tuple[str, str, str, str, str | None], dict[str, Any] | None] = {}
_FILES: dict[str, list[dict[str, Any]]] = {}
_LOCK = threading.Lock()


def default_source(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("TUNER_BEST_CONFIGS"):
        return env["TUNER_BEST_CONFIGS"]
    from tuner.settings import Settings

    return Settings.from_env(env).db_url


def _is_file_source(source: str) -> bool:
    return "://" not in source


def _pick(entries: list[dict[str, Any]], device_kind: str | None) -> dict[str, Any] | None:
    """The entry for ``device_kind``, or with no kind given the best fraction of any kind."""
    if device_kind is not None:
        entries = [e for e in entries if e["device_kind"] == device_kind]
    if not entries:
        return None
    return dict(max(entries, key=lambda e: e["fraction"])["config"])


def _from_file(source: str, kernel: str, phash: str, dtype: str,
               device_kind: str | None) -> dict[str, Any] | None:
    entries = _FILES.get(source)
    if entries is None:
        from tuner.export import read_export

        entries = read_export(Path(source))
        _FILES[source] = entries
    matches = [e for e in entries
               if e["kernel"] == kernel and e["problem_hash"] == phash and e["dtype"] == dtype]
    return _pick(matches, device_kind)


def _from_db(source: str, kernel: str, phash: str, dtype: str,
             device_kind: str | None) -> dict[str, Any] | None:
    from db import repository as repo
    from db.session import make_engine
    from db.session import session_factory

    engine = make_engine(source, create_parent=False)
    try:
        with session_factory(engine)() as session:
            kinds = None if device_kind is None else [device_kind]
            rows = repo.best_config_rows(session, kernel, phash, dtype, kinds)
            entries = [{"device_kind": r.device_kind, "fraction": r.fraction,
                        "config": r.config} for r in rows]
    except Exception as exc:  # missing tables: nothing tuned there yet
        if "no such table" in str(exc) or "does not exist" in str(exc):
            return None
        raise
    finally:
        engine.dispose()
    return _pick(entries, device_kind)


def best_config(kernel: str, problem: Mapping[str, int], dtype: str,
                device_kind: str | None = None, *, source: str | None = None,
                ) -> dict[str, Any] | None:
    """The best tuned config, or ``None`` when nothing was tuned for this key.

    ``problem`` maps dimension names to sizes (``{"M": 512, "N": 512, "K": 512}``); with
    ``device_kind=None`` the best entry of any device kind is returned. Answers (including
    ``None``) are cached per process; ``clear_cache()`` forgets them.
    """
    src = source if source is not None else default_source()
    key = (src, kernel, problem_hash(problem), dtype, device_kind)
    if key in _CACHE:
        cached = _CACHE[key]
        return None if cached is None else dict(cached)
    with _LOCK:
        if _is_file_source(src):
            answer = _from_file(src, kernel, key[2], dtype, device_kind)
        else:
            answer = _from_db(src, kernel, key[2], dtype, device_kind)
        _CACHE[key] = answer
    return None if answer is None else dict(answer)


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()
        _FILES.clear()
