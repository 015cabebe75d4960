"""Kernel autotuning service. The production surface is ``best_config`` and ``autotune`` (a
drop-in for ``@triton.autotune`` that launches with tuned configs); ``patch`` makes a
library's own launches use the configs tuned in place (``tuner tune --captured``); ``tune``
runs a job.

Importing ``tuner`` is cheap: it imports neither Optuna, Celery, torch nor Triton.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
    from tuner.api import tune as tune
    from tuner.serving.autotune import autotune as autotune
    from tuner.serving.lookup import best_config as best_config
    from tuner.serving.patch import patch as patch


def __getattr__(name: str) -> Any:
    if name == "best_config":
        from tuner.serving.lookup import best_config

        return best_config
    if name == "autotune":
        from tuner.serving.autotune import autotune

        return autotune
    if name == "patch":
        from tuner.serving.patch import patch

        return patch
    if name == "tune":
        from tuner.api import tune

        return tune
    raise AttributeError(name)


__all__ = ["autotune", "best_config", "patch", "tune"]
