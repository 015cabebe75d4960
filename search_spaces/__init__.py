"""Declarative search spaces: parameter types, constraints and the spaces of each kernel.

This package is the lowest layer of the service and imports nothing else of ours.
"""

from __future__ import annotations

from search_spaces.canonical import canonical_json
from search_spaces.canonical import stable_hash
from search_spaces.constraints import Constraint
from search_spaces.context import DTYPE_BYTES
from search_spaces.context import Context
from search_spaces.context import TargetLimits
from search_spaces.params import Categorical
from search_spaces.params import Choice
from search_spaces.params import IntRange
from search_spaces.params import Param
from search_spaces.params import PowerOfTwo
from search_spaces.params import when
from search_spaces.space import Config
from search_spaces.space import SearchSpace

__all__ = [
    "DTYPE_BYTES",
    "Categorical",
    "Choice",
    "Config",
    "Constraint",
    "Context",
    "IntRange",
    "Param",
    "PowerOfTwo",
    "SearchSpace",
    "TargetLimits",
    "canonical_json",
    "stable_hash",
    "when",
]
from search_spaces import attention as attention
from search_spaces import chain as chain
from search_spaces import matmul as matmul
from search_spaces import rowwise as rowwise
