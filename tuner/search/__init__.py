"""Search strategies: which config to measure next.

``tuner.search.proposer`` is the interface (``Proposer``, ``Asked``, ``Told``);
``model_search`` is the service's default (``auto``), paired with a cold twin by ``hedged``
when the job has a prior or transferred configs (``transfer`` maps those between spaces).
Optuna's samplers are adapters in ``tuner.optuna.samplers``; a job's ``sampler`` name is
resolved by the control plane's registry (``tuner.control.searches``).
"""

from __future__ import annotations

from tuner.search.proposer import Asked
from tuner.search.proposer import Proposer
from tuner.search.proposer import SearchFactory
from tuner.search.proposer import Told

__all__ = ["Asked", "Proposer", "SearchFactory", "Told"]
