"""Export the best configs to a self-contained JSON file, and read such a file back.

The file is what production code without database access reads (``tuner.best_config(...,
source="best.json")``). Layout (``schema`` 1)::

    {"schema": 1, "exported_at": "...", "source": "<db url, password hidden>",
     "configs": [{"kernel", "identity", "problem", "problem_key", "problem_hash", "dtype",
                  "device_kind", "backend", "config", "triton", "fraction", "median_ms",
                  "fingerprint", "trial_id", "job_id", "updated_at"}, ...],
     "defaults": {"<kernel>": <the space's first seed config>, ...}}

``config`` is the flat form ``best_config`` serves (meta-parameters and launch options side by
side); ``triton`` is the same config in the shape ``triton.Config`` takes —
``{"kwargs": {...meta-parameters}, "num_warps": 8, "num_stages": 3}`` (plus ``num_ctas`` and
``maxnreg`` when tuned) — so ``triton.Config(**entry["triton"])`` launches it exactly.

``identity`` says whose code the config was tuned for (``tuner.kernels.identity``). The file
is strict JSON: a row whose figures are not finite numbers is left out.

``python_module`` renders the same configs as a self-contained Python module.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuner.core.launch import LAUNCH_OPTIONS
from tuner.core.launch import triton_form

__all__ = ["LAUNCH_OPTIONS", "triton_form"]

EXPORT_SCHEMA = 1


def export_rows(rows: Sequence[Any], source: str) -> dict[str, Any]:
    """The export document for ``BestConfig`` rows."""
    return {
        "schema": EXPORT_SCHEMA,
        "exported_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": source,
        "configs": [
            {
                "kernel": r.kernel, "identity": r.kernel_identity,
                "problem": r.problem, "problem_key": r.problem_key,
                "problem_hash": r.problem_hash, "dtype": r.dtype, "device_kind": r.device_kind,
                "backend": r.backend, "config": r.config, "triton": triton_form(r.config),
                "fraction": r.fraction,
                "median_ms": r.median_ms, "fingerprint": r.fingerprint, "trial_id": r.trial_id,
                "job_id": r.job_id, "updated_at": r.updated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            for r in rows if _finite(r.fraction) and _finite(r.median_ms)
        ],
    }


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def write_export(document: dict[str, Any], path: Path) -> None:
    """Write atomically (a reader never sees half a file), as strict JSON (``ValueError`` for
    a NaN or an infinity anywhere: no JSON reader would accept the file)."""
    text = json.dumps(document, indent=1, sort_keys=True, allow_nan=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def read_export_document(path: Path) -> dict[str, Any]:
    """The whole export document; ``ValueError`` if the file is not one. Entries and defaults
    that do not have the export's shape are left out (``malformed`` counts them), so a
    hand-edited or damaged file serves what is intact and nothing that could break a caller."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or data.get("schema") != EXPORT_SCHEMA \
            or not isinstance(data.get("configs"), list):
        raise ValueError(f"{path} is not a tuner export (schema {EXPORT_SCHEMA})")
    configs = [e for e in data["configs"] if _well_formed(e)]
    raw_defaults = data.get("defaults")
    defaults = raw_defaults if isinstance(raw_defaults, dict) else {}
    kept = {k: v for k, v in defaults.items() if isinstance(v, dict) and _params(v)}
    malformed = len(data["configs"]) - len(configs) + len(defaults) - len(kept) \
        + (raw_defaults is not None and not isinstance(raw_defaults, dict))
    return {**data, "configs": configs, "defaults": kept, "malformed": malformed}


def _params(config: dict[str, Any]) -> bool:
    """Parameter names to JSON scalars (what a config is)."""
    return all(isinstance(k, str) and (v is None or isinstance(v, str | int | float | bool))
               for k, v in config.items())


def _well_formed(e: Any) -> bool:
    """An export entry that lookups can serve: the fields they read, of the right types."""
    if not isinstance(e, dict):
        return False
    problem, config = e.get("problem"), e.get("config")
    return (isinstance(e.get("kernel"), str) and isinstance(e.get("dtype"), str)
            and isinstance(e.get("device_kind"), str)
            and isinstance(problem, dict) and all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                and v > 0 for k, v in problem.items())
            and isinstance(config, dict) and _params(config) and _finite(e.get("fraction"))
            and isinstance(e.get("fingerprint", {}), dict)
            and isinstance(e.get("identity"), str | type(None)))


def read_export(path: Path) -> list[dict[str, Any]]:
    """The config entries of an export file; ``ValueError`` if it is not one."""
    return list(read_export_document(path)["configs"])


PYTHON_TEMPLATE = '''"""Best tuned configs, generated by `tuner export --python`.

Exported at {exported_at} from {source}.

Self-contained: no import of the tuning service. ``best_config`` returns the config tuned for
exactly this problem, else the one tuned for the problem nearest in log space (same kernel,
dtype and, when given, device kind), else ``None``; ``triton_config`` returns the same config
as a ``triton.Config`` (meta-parameters as kwargs, warps and stages as launch options). Do not
edit: re-export instead.
"""

from __future__ import annotations

import math

#: (kernel, device kind, dtype, ((dimension, size), ...)) -> (config, roofline fraction)
CONFIGS = {configs}


def best_config(kernel, problem, dtype, device_kind=None):
    key = tuple(sorted(problem.items()))
    best = None
    for (k, kind, dt, dims), (config, fraction) in CONFIGS.items():
        if k != kernel or dt != dtype or (device_kind is not None and kind != device_kind):
            continue
        if {{d for d, _ in dims}} != set(problem):
            continue
        dist = sum((math.log(max(1, problem[d])) - math.log(max(1, v))) ** 2 for d, v in dims)
        rank = (dims != key, dist, -fraction)
        if best is None or rank < best[0]:
            best = (rank, config)
    return None if best is None else dict(best[1])


def triton_config(kernel, problem, dtype, device_kind=None):
    """``best_config`` as a ``triton.Config``, or ``None``."""
    import triton

    config = best_config(kernel, problem, dtype, device_kind)
    if config is None:
        return None
    launch = {{k: int(config.pop(k)) for k in {launch_options!r} if config.get(k) is not None}}
    return triton.Config(config, **launch)
'''


def python_module(document: dict[str, Any]) -> str:
    """A generated Python module holding the export's configs (see ``PYTHON_TEMPLATE``)."""
    configs = {
        (e["kernel"], e["device_kind"], e["dtype"],
         tuple(sorted((str(k), int(v)) for k, v in e["problem"].items()))):
        (e["config"], e["fraction"])
        for e in document["configs"]
    }
    lines = ["{"] + [f"    {k!r}: {v!r}," for k, v in sorted(configs.items(), key=repr)] + ["}"]
    return PYTHON_TEMPLATE.format(exported_at=document["exported_at"],
                                  source=document["source"], configs="\n".join(lines),
                                  launch_options=LAUNCH_OPTIONS)
