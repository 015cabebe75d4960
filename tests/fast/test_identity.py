"""A Triton kernel's identity: the same compiled or interpreted, changed by editing it."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pytest
import triton

from tuner.kernels.identity import jit_identity

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def helper(x):
    return x * {factor}


@triton.autotune(configs=[triton.Config({{"BLOCK": 64}})], key=["n"])
@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)
'''
_count = itertools.count()


def _load(tmp_path: Path, interpret: bool, factor: int = 2):
    path = tmp_path / f"kernel_{next(_count)}.py"
    path.write_text(KERNEL.format(factor=factor))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    before = triton.knobs.runtime.interpret
    triton.knobs.runtime.interpret = interpret
    try:
        spec.loader.exec_module(module)
    finally:
        triton.knobs.runtime.interpret = before
    return module


def test_compiled_and_interpreted_kernels_share_one_identity(tmp_path):
    compiled = _load(tmp_path, interpret=False)
    interpreted = _load(tmp_path, interpret=True)
    assert type(compiled.scale_kernel.fn).__name__ == "JITFunction"
    assert type(interpreted.scale_kernel.fn).__name__ == "InterpretedFunction"
    identity = jit_identity(compiled.scale_kernel)
    assert identity.startswith("jit:")
    assert jit_identity(interpreted.scale_kernel) == identity
    assert jit_identity(compiled.scale_kernel.fn) == identity


def test_editing_a_called_jit_function_changes_the_identity(tmp_path):
    for interpret in (False, True):
        a = jit_identity(_load(tmp_path, interpret, factor=2).scale_kernel)
        b = jit_identity(_load(tmp_path, interpret, factor=3).scale_kernel)
        assert a != b


def test_an_object_that_is_no_kernel_is_refused():
    with pytest.raises(ValueError, match="not a Triton kernel"):
        jit_identity(42)
