"""Triton's terms for a config: which parameters are launch options, and the split that
``triton.Config(**form)`` takes. Imports nothing (used by the production read path)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Parameters that are launch options of ``triton.Config``, not kernel meta-parameters.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def triton_form(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` split the way ``triton.Config(**form)`` takes it: meta-parameters under
    ``kwargs``, the launch options it sets beside them (Triton's defaults for the others)."""
    form: dict[str, Any] = {"kwargs": {k: v for k, v in config.items()
                                       if k not in LAUNCH_OPTIONS}}
    form.update({k: int(config[k]) for k in LAUNCH_OPTIONS if config.get(k) is not None})
    return form
