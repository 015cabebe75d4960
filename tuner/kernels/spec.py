"""The kernel spec: everything the service needs to tune one Triton kernel.

Built-in kernels and user kernels (``tuner tune --kernel path/to/module.py:NAME``) are both a
``KernelSpec``. A spec names its problem dimensions, dtypes and search space, and gives plain
functions for the rest:

* ``make_inputs(problem, dtype, seed, device) -> dict[str, Tensor]``: fresh seeded random inputs
  (never zeros) plus the output buffer(s), all on ``device``;
* ``launch(tensors, problem, config) -> None``: run the Triton kernel once with ``config``;
* ``reference(tensors, problem) -> Tensor``: the torch answer for ``tensors[output]`` (or, with
  ``outputs``, a sequence of answers, one per output);
* ``flops(problem, dtype)`` and ``min_bytes(problem, dtype)``: work and the bytes a perfect kernel
  must move (every input read once, every output written once);
* ``tolerance[dtype]``: the largest relative Frobenius error ``‖out − ref‖ / ‖ref‖`` accepted.

Importing this module imports neither torch nor Triton.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from search_spaces import DTYPE_BYTES
from search_spaces import SearchSpace
from search_spaces import stable_hash

if TYPE_CHECKING:
    import torch

    from tuner.core.devices.datasheets import DeviceSpec

Problem = Mapping[str, int]

#: Largest size accepted for one problem dimension, and for the element count of one tensor
#: (int32 indexing in the kernels).
MAX_DIM = 1 << 24
MAX_ELEMENTS = (1 << 31) - 1


class KernelError(ValueError):
    """A kernel reference that cannot be resolved; the message is meant for the user."""


class ConfigRejected(Exception):
    """Raised by a launch whose kernel refuses the config before running it (e.g. the
    ``early_config_prune`` of a ``@triton.autotune`` decorator): an ``invalid`` trial."""


def _same_dtype(dtype: str) -> str:
    return dtype


@dataclass(frozen=True)
class KernelSpec:
    """A tunable kernel. See the module docstring for the contract of each function."""

    name: str
    description: str
    dims: tuple[str, ...]
    dtypes: tuple[str, ...]
    space: SearchSpace
    make_inputs: Callable[[Problem, str, int, str], dict[str, torch.Tensor]]
    launch: Callable[[dict[str, torch.Tensor], Problem, Mapping[str, Any]], None]
    reference: Callable[[dict[str, torch.Tensor], Problem], torch.Tensor]
    output: str
    flops: Callable[[Problem, str], float]
    min_bytes: Callable[[Problem, str], float]
    tolerance: Mapping[str, float]
    compute_dtype: Callable[[str], str] = _same_dtype
    tensor_elements: Callable[[Problem], int] | None = None
    example_problem: Mapping[str, int] = field(default_factory=dict)
    max_dim: int = MAX_DIM
    #: Optional analytic model: ``model(problem, dtype, config, device_spec, static) -> ms``,
    #: a *prediction* (``model:<gpu>`` backend, and the search's prior on GPU jobs).
    model: Callable[[Problem, str, Mapping[str, Any], DeviceSpec, Mapping[str, Any] | None],
                    float] | None = None
    #: Optional count of exponentials (``exps(problem)``): a third roof, on the GPU's
    #: special-function units (attention's softmax).
    exps: Callable[[Problem], float] | None = None
    #: The file whose text identifies the kernel's code (default: the file defining ``launch``).
    source_path: str | None = None
    #: Optional extra problem validation: ``problem_check(problem) -> [reason, …]``.
    problem_check: Callable[[Mapping[str, Any]], list[str]] | None = None
    #: The source hash when the module is not imported here (``tuner.kernels.isolated``).
    known_source_hash: str | None = None
    #: Optional: the output tensors to check, read after a launch (``outputs(tensors)``),
    #: for kernels whose launcher allocates and returns several; ``reference`` then returns
    #: one answer per output. Default: ``[tensors[output]]``.
    outputs: Callable[[dict[str, Any]], list[torch.Tensor]] | None = None
    #: Whose code it is (``tuner.kernels.identity``): ``builtin``, ``jit:…`` or ``file:…``;
    #: set by the registry (``None`` only on a spec not loaded through it).
    identity: str | None = None

    def problem_errors(self, problem: Mapping[str, Any]) -> list[str]:
        """Why ``problem`` cannot be tuned (empty when it can)."""
        errors = dimension_errors(problem, tuple(self.dims), self.max_dim)
        if not errors and self.problem_check is not None:
            errors.extend(self.problem_check(problem))
        if not errors and self.tensor_elements is not None:
            n = self.tensor_elements(problem)
            if n > MAX_ELEMENTS:
                errors.append(f"the largest tensor would have {n} elements (limit {MAX_ELEMENTS})")
        return errors

    def dtype_errors(self, dtype: str) -> list[str]:
        if dtype not in self.dtypes:
            choices = ", ".join(self.dtypes)
            return [f"unknown dtype {dtype!r} for {self.name} (choose from {choices})"]
        return []

    def canonical_problem(self, problem: Mapping[str, int]) -> dict[str, int]:
        """The problem with its dimensions in declared order."""
        return {d: int(problem[d]) for d in self.dims}

    def source_hash(self) -> str:
        """SHA-256 of the source file defining ``launch`` (the kernel and its launcher)."""
        if self.known_source_hash is not None:
            return self.known_source_hash
        path = self.source_path or inspect.getsourcefile(self.launch)
        text = Path(path).read_text() if path else inspect.getsource(self.launch)
        return stable_hash(text)

    def elem_bytes(self, dtype: str) -> int:
        return DTYPE_BYTES[dtype]


def dimension_errors(problem: Mapping[str, Any], dims: tuple[str, ...] | None,
                     max_dim: int = MAX_DIM) -> list[str]:
    """Why ``problem``'s sizes cannot be a problem of a kernel with ``dims`` (None: any names):
    missing or unknown dimensions, sizes that are not positive integers of at most
    ``max_dim``. Empty when they can."""
    errors: list[str] = []
    names = tuple(problem) if dims is None else dims
    if dims is not None:
        expected = ",".join(f"{d}=…" for d in dims)
        missing = [d for d in dims if d not in problem]
        extra = [d for d in problem if d not in dims]
        if missing:
            errors.append(f"missing dimension(s) {', '.join(missing)} (expected {expected})")
        if extra:
            errors.append(f"unknown dimension(s) {', '.join(extra)} (expected {expected})")
    for dim in names:
        value = problem.get(dim)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(f"{dim} must be an integer, got {value!r}")
        elif value <= 0:
            errors.append(f"{dim} must be positive, got {value}")
        elif value > max_dim:
            errors.append(f"{dim}={value} is larger than the limit {max_dim}")
    return errors
