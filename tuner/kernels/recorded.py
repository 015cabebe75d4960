"""A recorded space (Kernel Tuner cache file) seen as a kernel spec, for the ``replay:`` backend.

The kernel itself is not available, only its measurements: ``launch`` and friends refuse to
run, FLOPs and bytes are unknown, and trials are scored against the fastest recorded time.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import NoReturn

from search_spaces.recorded import Recording
from search_spaces.recorded import load_recording
from search_spaces.recorded import recorded_space
from tuner.core.target import Target
from tuner.core.target import as_target
from tuner.kernels.identity import BUILTIN
from tuner.kernels.spec import KernelSpec


def _not_runnable(*_: Any, **__: Any) -> NoReturn:
    raise RuntimeError("a recorded kernel can only be replayed (backend replay:<file>)")


def recorded_kernel(path: str | Path) -> KernelSpec:
    """The spec of the kernel recorded in ``path`` (dims ``p0, p1, …`` = its problem size)."""
    rec = load_recording(path)
    dims = tuple(rec.problem().keys())

    def no_count(problem: Mapping[str, int], dtype: str) -> float:
        return 0.0

    return KernelSpec(
        name=f"recorded:{rec.kernel_name}",
        description=f"{rec.kernel_name} recorded on {rec.device_name} ({len(rec.entries)} "
                    f"entries, {rec.path.name})",
        dims=dims,
        dtypes=("fp32",),
        space=recorded_space(rec),
        make_inputs=_not_runnable,
        launch=_not_runnable,
        reference=_not_runnable,
        output="",
        flops=no_count,
        min_bytes=no_count,
        tolerance={},
        example_problem=rec.problem(),
        max_dim=max([*rec.problem().values(), 1]),
        identity=BUILTIN,
    )


def recording_of(backend: str | Target) -> Recording:
    """The recording named by a ``replay:<file>`` target."""
    path = as_target(backend).recording
    if path is None:
        raise ValueError(f"{backend!s} is not a replay backend")
    return load_recording(path)
