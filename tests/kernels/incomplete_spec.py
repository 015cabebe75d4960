"""A user kernel spec missing a required field (for the error-message tests)."""

from search_spaces import PowerOfTwo
from search_spaces import SearchSpace
from tuner.kernels import KernelSpec

SPEC = KernelSpec(  # type: ignore[call-arg]  # no reference, output, flops, ...: on purpose
    name="incomplete", description="", dims=("N",), dtypes=("fp32",),
    space=SearchSpace("incomplete", (PowerOfTwo("BLOCK", 16, 64),)),
    make_inputs=lambda p, d, s, dev: {}, launch=lambda t, p, c: None,
)
