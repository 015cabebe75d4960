"""The data-only table of built-in signatures (``tuner.kernels.names``) says what the kernels'
own specs say, so ``tuner best`` can check a question without importing torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tuner.kernels import resolve_kernel
from tuner.kernels.names import BUILTIN
from tuner.kernels.names import builtin_signature
from tuner.kernels.names import builtin_space_hash
from tuner.kernels.spec import MAX_DIM

EPILOGUES = ["matmul+bias", "matmul+gelu", "matmul+bias+silu+residual", "matmul+residual"]


@pytest.mark.parametrize("name", [*BUILTIN, *EPILOGUES])
def test_the_signature_table_matches_the_kernels(name):
    spec = resolve_kernel(name, "interpret", ())
    assert builtin_signature(name) == (tuple(spec.dims), tuple(spec.dtypes))
    assert spec.max_dim == MAX_DIM  # the generic bound is the kernel's bound


@pytest.mark.parametrize("name", ["matmul+gelu+bias", "matmul+", "softmax+bias", "nokernel"])
def test_other_names_have_no_signature(name):
    assert builtin_signature(name) is None


def test_the_table_imports_neither_torch_nor_triton():
    code = ("import sys, tuner.kernels.names as n; [n.builtin_space_hash(k) for k in n.BUILTIN]; "
            "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", [*BUILTIN, *EPILOGUES])
def test_the_space_hash_is_the_kernels(name):
    assert builtin_space_hash(name) == resolve_kernel(name, "interpret", ()).space.space_hash()
