"""libdevice math on the Triton interpreter (``tuner.kernels.interpreter_math``), checked
against torch's math in a real interpreted kernel, for both import styles."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from tuner.kernels.interpreter_math import BINARY
from tuner.kernels.interpreter_math import UNARY
from tuner.kernels.interpreter_math import install

KERNELS = '''
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.libdevice import tanh, rsqrt, erf, pow, fma, round


@triton.jit
def by_module(X, Y, N: tl.constexpr):
    o = tl.arange(0, N)
    x = tl.load(X + o)
    tl.store(Y + o, libdevice.tanh(x) + libdevice.rsqrt(x * x + 1.0))


@triton.jit
def by_name(X, Y, Z, N: tl.constexpr):
    o = tl.arange(0, N)
    x = tl.load(X + o)
    tl.store(Y + o, erf(x) + pow(x * x, 0.5))
    tl.store(Z + o, fma(x, x, 1.0) + round(x * 4.0))
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory):
    path = Path(tmp_path_factory.mktemp("libdevice")) / "libdevice_kernels.py"
    path.write_text(KERNELS)
    spec = importlib.util.spec_from_file_location("libdevice_kernels", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["libdevice_kernels"] = module
    spec.loader.exec_module(module)
    install()
    yield module
    del sys.modules["libdevice_kernels"]


def test_functions_called_through_the_module_match_torch(kernels):
    x = torch.linspace(-3, 3, 64)
    y = torch.empty_like(x)
    kernels.by_module[(1,)](x, y, N=64)
    torch.testing.assert_close(y, torch.tanh(x) + torch.rsqrt(x * x + 1.0))


def test_functions_imported_by_name_match_torch(kernels):
    x = torch.linspace(-3, 3, 64)
    y, z = torch.empty_like(x), torch.empty_like(x)
    kernels.by_name[(1,)](x, y, z, N=64)
    torch.testing.assert_close(y, torch.erf(x) + x.abs())
    half_away = torch.sign(x * 4) * torch.floor((x * 4).abs() + 0.5)  # C round, not even
    torch.testing.assert_close(z, x * x + 1.0 + half_away)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_result_keeps_the_input_precision(kernels, dtype):
    x = torch.linspace(-1, 1, 32, dtype=dtype)
    y = torch.empty_like(x)
    kernels.by_module[(1,)](x, y, N=32)
    assert y.dtype == dtype
    want = (torch.tanh(x.float()) + torch.rsqrt(x.float() ** 2 + 1.0)).to(dtype)
    torch.testing.assert_close(y, want, atol=2e-3, rtol=2e-3)


def test_every_listed_name_is_a_libdevice_function():
    from triton.language.extra import libdevice

    missing = [n for n in (*UNARY, *BINARY) if not callable(getattr(libdevice, n, None))]
    assert missing == []
    assert "tanh" in install() and "j0" not in install()
