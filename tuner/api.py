"""The Python API for tuning: what ``tuner tune`` does, callable from a script or notebook.

    import tuner
    result = tuner.tune("examples/add_relu_kernel.py:ADD_RELU", shapes=["N=65536"],
                        dtype="fp16", trials=10)
    result.best[0]["config"]    # {"BLOCK": 1024, "num_warps": 4}

It runs on the embedded default (no Redis), stores every trial in the same database as the CLI
(``db`` or ``TUNER_DB_URL``) and returns the best config of each problem. Bad input raises
``ValueError`` with the same one-line message the CLI prints.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from tuner.app.options import JobOptions
from tuner.app.tune import tune as tune_locally
from tuner.core.sandbox import protect_process
from tuner.core.settings import Settings
from tuner.core.types import DEFAULT_TRANSFER
from tuner.views.progress import Event
from tuner.views.progress import describe
from tuner.views.progress import ignore


@dataclass
class TuneResult:
    """A finished tuning job: its id, database, and per problem the best config found."""

    job_id: int
    db_url: str
    #: One entry per problem: ``{"problem", "config", "fraction", "median_ms"}`` (config None
    #: when no trial succeeded).
    best: list[dict[str, Any]] = field(default_factory=list)


def _print_to_stderr(event: Event) -> None:
    line = describe(event)
    if line is not None:
        print(line, file=sys.stderr, flush=True)


def tune(kernel: str, shapes: Sequence[str] | str, *, dtype: str | None = None,
         trials: int = 30, backend: str = "auto", device_kind: str | None = None,
         sampler: str = "auto", seed: int | None = None, parallel: int = 1,
         time_limit: float | None = None, target: float | None = None,
         patience: int | None = None, confirm_top: int = 3,
         transfer: int = DEFAULT_TRANSFER, db: str | None = None,
         compile_timeout: float = 120, run_timeout: float = 60,
         compile_procs: int | None = None, devices: Sequence[int] = (),
         verbose: bool = False) -> TuneResult:
    """Tune ``kernel`` (a built-in name or ``path/to/module.py:NAME``) on ``shapes``
    (``"M=512,N=512,K=512"`` or a list of them); blocking. ``compile_procs``: processes per
    GPU compiling the next configs while one is timed (``tuner tune --compile-procs``;
    ``None``: from the cores, 0: serial). ``devices``: the GPUs ``backend="cuda"`` times on,
    one bench process each (default: ``cuda:0 … cuda:parallel-1``; ``tuner.measure.gpus``).
    ``verbose`` prints the new bests to stderr as they come.

    The calling process holds the database URL, so, like every ``tuner`` command, it is made
    non-dumpable for the rest of its life (``tuner.core.sandbox.protect_process``): a kernel
    running as its user cannot read its environment or memory through ``/proc``."""
    protect_process()
    settings = dataclasses.replace(Settings.from_env().with_db(db), gpus=tuple(devices))
    parallel = len(devices) if devices and parallel == 1 else parallel
    shape_list = [shapes] if isinstance(shapes, str) else list(shapes)
    options = JobOptions(kernel, shape_list, dtype, backend, device_kind, trials, time_limit,
                         target, patience, sampler, seed, parallel, compile_timeout,
                         run_timeout, None, None, confirm_top=confirm_top, transfer=transfer,
                         lookahead=compile_procs)
    run = tune_locally(options, settings, _print_to_stderr if verbose else ignore)
    best = [{"problem": dict(p.problem.problem),
             "config": dict(p.best.config) if p.best else None,
             "fraction": p.problem.best_fraction,
             "median_ms": (p.best.confirm_ms or p.best.median_ms) if p.best else None}
            for p in run.summary.problems]
    return TuneResult(run.outcome.job_id, settings.db_url, best)
