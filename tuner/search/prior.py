"""A kernel's analytic model as the default search's prior (GPU jobs only)."""

from __future__ import annotations

import math
from collections.abc import Callable

from search_spaces import Config
from tuner.core.devices.datasheets import device_spec
from tuner.core.target import Evidence
from tuner.core.types import JobSpec
from tuner.kernels import KernelSpec


def model_prior(kernel: KernelSpec, spec: JobSpec,
                problem: dict[str, int]) -> Callable[[Config], float] | None:
    """The kernel's analytic model as the search's prior, for jobs on a datasheet GPU
    (measured on it, or predicted for it); ``None`` on the CPU or without a model."""
    device = device_spec(spec.device_kind)
    target = spec.target  # measured on a GPU, or predicted for one (a stand-in is the model)
    on_gpu = target.is_cuda or target.evidence is Evidence.PREDICTED
    if kernel.model is None or device is None or not on_gpu:
        return None
    model = kernel.model

    def prior(config: Config) -> float:
        ms = model(problem, spec.dtype, config, device, None)
        return -math.log(ms) if 0 < ms < math.inf else -math.inf

    return prior
