"""A kernel whose space has no valid config for any problem (for the bad-input tests)."""

from __future__ import annotations

from search_spaces import Constraint
from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from search_spaces.constraints import register
from tests.kernels.fault_kernel import make_inputs
from tests.kernels.fault_kernel import reference
from tuner.kernels.spec import KernelSpec


@register("never", "no config is ever allowed")
def never(config, ctx):
    return False


def _launch(tensors, problem, config):
    raise AssertionError("never launched: the space is empty")


EMPTY = KernelSpec(
    name="empty", description="nothing valid", dims=("N",), dtypes=("fp32",),
    space=SearchSpace(name="empty", params=(PowerOfTwo("BLOCK", 16, 64),),
                      constraints=(Constraint.of("never"),)),
    make_inputs=make_inputs, launch=_launch, reference=reference, output="y",
    flops=lambda p, d: 1.0, min_bytes=lambda p, d: 1.0, tolerance={"fp32": 1e-6},
)
