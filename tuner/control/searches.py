"""The searches a job can name (``JobSpec.sampler``, ``--sampler``): one registry.

``auto`` is the service's default (``tuner.search.model_search``); ``tpe``, ``random`` and
``grid`` are Optuna's samplers (``tuner.optuna.samplers``). Neither the search interface
(``tuner.search.proposer``) nor its implementations know this table; ``SEARCHES.register``
adds a search without editing any caller.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence

from search_spaces import Config
from search_spaces import Context
from search_spaces import SearchSpace
from tuner.core.registry import Registry
from tuner.optuna.samplers import SAMPLERS
from tuner.optuna.samplers import sampler_search
from tuner.search.hedged import HedgedSearch
from tuner.search.model_search import ModelSearch
from tuner.search.proposer import Proposer
from tuner.search.proposer import SearchFactory


def default_search(space: SearchSpace, ctx: Context, seed: int | None,
                   prior: Callable[[Config], float] | None,
                   warm_start: Sequence[Config]) -> Proposer:
    """``auto``: the model-guided, constraint-aware search with its measured defaults; with a
    prior or warm configs, hedged by a cold twin (``tuner.search.hedged``), so a prior that
    misleads costs little."""
    if prior is None and not warm_start:
        return ModelSearch(space, ctx, seed)
    return HedgedSearch(space, ctx, seed, prior, warm_start)


SEARCHES: Registry[SearchFactory] = Registry("sampler", {"auto": default_search})
for _name in SAMPLERS:
    SEARCHES.register(_name, sampler_search(_name))


def make_proposer(name: str, space: SearchSpace, ctx: Context, seed: int | None,
                  prior: Callable[[Config], float] | None = None,
                  warm_start: Sequence[Config] = ()) -> Proposer:
    """The named search for one problem (``ValueError`` for an unknown name). ``prior`` and
    ``warm_start``: see ``tuner.search.proposer.SearchFactory``."""
    return SEARCHES.get(name)(space, ctx, seed, prior, warm_start)
