"""What a problem's search starts from, and how far it trusts it: chosen once per problem,
reported on the problem row (``tuner_problems.prior``) as the search goes.

A search starts from (``Start``) a **prior** — the kernel's analytic model (GPU jobs), else,
with transfer on, this problem's measured results on other device kinds
(``tuner.search.transfer.measured_prior``) — and **warm configs**, the stored best configs of
related problems (``transfer_configs``). Either makes the default search hedged
(``tuner.search.hedged``): its ``trust()`` and ``agreement()`` are written to the row after
each round of results, so ``tuner status`` and the report say which prior the search used and
how much it believed it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import sqlalchemy.orm as so

import db.repository as repo
from search_spaces import Config
from tuner.core.types import JobSpec
from tuner.kernels import KernelSpec
from tuner.search.prior import model_prior
from tuner.search.transfer import measured_prior
from tuner.search.transfer import stored_best_rows
from tuner.search.transfer import transfer_configs


@dataclass
class Start:
    """A problem's prior (``None``: none), its warm configs and what to report of them."""

    prior: Callable[[Config], float] | None = None
    warm: list[Config] = field(default_factory=list)
    source: str | None = None  # for people: where the prior and warm configs come from

    def report(self, proposer: Any) -> dict[str, Any] | None:
        """The problem row's ``prior`` now: source, trust, rank agreement and whether the
        search dropped it (``None``: the search started cold)."""
        if self.source is None:
            return None
        trust = getattr(proposer, "trust", None)
        agreement = getattr(proposer, "agreement", None)
        dropped = getattr(proposer, "prior_dropped", None)
        value = agreement() if callable(agreement) else None
        return {"source": self.source,
                "trust": round(float(trust()), 4) if callable(trust) else None,
                "agreement": None if value is None else round(float(value), 4),
                "dropped": bool(dropped()) if callable(dropped) else False}


def choose_start(session: so.Session, kernel: KernelSpec, spec: JobSpec,
                 problem: dict[str, int], problem_key: str) -> Start:
    """The analytic model (GPU jobs); else, with transfer on and the default search, the
    results of this problem on other device kinds; and the stored best configs of related
    problems as warm configs."""
    start = Start(prior=model_prior(kernel, spec, problem))
    if spec.sampler != "auto":  # Optuna's samplers use no prior: nothing to report
        return start
    parts = ["the kernel's analytic model"] if start.prior is not None else []
    if spec.transfer <= 0:
        start.source = parts[0] if parts else None
        return start
    if start.prior is None:
        results = repo.results_elsewhere(session, kernel.name, spec.dtype, problem_key,
                                         spec.device_kind)
        start.prior = measured_prior(results)
        if start.prior is not None:
            parts.append(f"{len(results)} results measured on other device kinds")
    rows = stored_best_rows(repo.best_configs_of(session, kernel.name, spec.dtype))
    start.warm = transfer_configs(rows, problem, spec.device_kind, spec.transfer)
    if start.warm:
        kinds = sorted({r.device_kind for r in rows})
        parts.append(f"{len(start.warm)} stored best config(s) of related problems "
                     f"({', '.join(kinds)})")
    start.source = "; ".join(parts) or None
    return start
