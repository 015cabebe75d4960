"""Tunable kernels: the spec every kernel follows, and the registry that finds them."""

from __future__ import annotations

from tuner.kernels.registry import BUILTIN
from tuner.kernels.registry import KernelError
from tuner.kernels.registry import load_kernel
from tuner.kernels.registry import resolve_kernel
from tuner.kernels.spec import KernelSpec

__all__ = ["BUILTIN", "KernelError", "KernelSpec", "load_kernel", "resolve_kernel"]
