"""Export the best configs to a self-contained JSON file, and read such a file back.

The file is what production code without database access reads (``tuner.best_config(...,
source="best.json")``). Layout (``schema`` 1)::

    {"schema": 1, "exported_at": "...", "source": "<db url, password hidden>",
     "configs": [{"kernel", "problem", "problem_key", "problem_hash", "dtype", "device_kind",
                  "backend", "config", "fraction", "median_ms", "fingerprint", "trial_id",
                  "job_id", "updated_at"}, ...]}
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXPORT_SCHEMA = 1


def export_rows(rows: Sequence[Any], source: str) -> dict[str, Any]:
    """The export document for ``BestConfig`` rows."""
    return {
        "schema": EXPORT_SCHEMA,
        "exported_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": source,
        "configs": [
            {
                "kernel": r.kernel, "problem": r.problem, "problem_key": r.problem_key,
                "problem_hash": r.problem_hash, "dtype": r.dtype, "device_kind": r.device_kind,
                "backend": r.backend, "config": r.config, "fraction": r.fraction,
                "median_ms": r.median_ms, "fingerprint": r.fingerprint, "trial_id": r.trial_id,
                "job_id": r.job_id, "updated_at": r.updated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            for r in rows
        ],
    }


def write_export(document: dict[str, Any], path: Path) -> None:
    """Write atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def read_export(path: Path) -> list[dict[str, Any]]:
    """The config entries of an export file; ``ValueError`` if it is not one."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or data.get("schema") != EXPORT_SCHEMA:
        raise ValueError(f"{path} is not a tuner export (schema {EXPORT_SCHEMA})")
    return list(data["configs"])
