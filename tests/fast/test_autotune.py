"""``tuner.autotune`` on the built-in matmul kernel: tuned configs by the decorator's key, in
Triton's terms, and a fallback to the kernel's own configs that never raises."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import triton

from tuner.kernels.matmul import _matmul_kernel
from tuner.serving.autotune import autotune
from tuner.serving.lookup import clear_cache

TUNED = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 2, "num_warps": 2,
         "num_stages": 2}
OWN = triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 1}, num_warps=4)


@pytest.fixture()
def export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("TUNER_DEVICE_KIND", "cpu")
    clear_cache()
    entry = {"kernel": "matmul", "problem": {"M": 64, "N": 64, "K": 64}, "dtype": "fp32",
             "device_kind": "cpu", "config": TUNED, "fraction": 0.5, "fingerprint": {}}
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"schema": 1, "exported_at": "", "source": "t",
                                "configs": [entry], "defaults": {}}))
    yield str(path)
    clear_cache()


def _matmul(kernel, m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = torch.randn(m, k), torch.randn(k, n)
    c = torch.empty(m, n)
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
    kernel[grid](a, b, c, c, c, c, c, m, n, k, a.stride(0), a.stride(1), b.stride(0),
                 b.stride(1), c.stride(0), c.stride(1), c.stride(0), c.stride(1), 1e-5,
                 UPCAST=False)
    return c, a @ b


def test_the_builtin_matmul_launches_with_its_tuned_config(export):
    kernel = autotune(configs=[OWN], key=["M", "N", "K"], name="matmul",
                      source=export)(_matmul_kernel)
    out, expected = _matmul(kernel, 64, 64, 64)
    assert torch.allclose(out, expected, atol=1e-3)
    used = kernel.best_config
    assert used.kwargs == {k: TUNED[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
    assert (used.num_warps, used.num_stages) == (2, 2)
    # 48 shares 64's power-of-two bucket: the bucket tier serves the same config.
    out, expected = _matmul(kernel, 48, 48, 48)
    assert torch.allclose(out, expected, atol=1e-3) and kernel.best_config.num_warps == 2


def test_no_tuned_config_falls_back_to_the_kernel_own_and_never_raises(export, tmp_path):
    other = autotune(configs=[OWN], key=["M", "N", "K"], name="matmul", dtype="bf16",
                     source=export)(_matmul_kernel)  # nothing stored for bf16
    out, expected = _matmul(other, 64, 64, 64)
    assert torch.allclose(out, expected, atol=1e-3) and other.best_config is OWN
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        unread = autotune(configs=[OWN], key=["M", "N", "K"], name="matmul",
                          source=str(broken))(_matmul_kernel)
        out, expected = _matmul(unread, 64, 64, 64)
        _matmul(unread, 32, 32, 32)
    assert torch.allclose(out, expected, atol=1e-3) and unread.best_config is OWN
    unreadable = [w for w in caught if "cannot read tuned configs" in str(w.message)]
    assert len(unreadable) == 1
    message = str(unreadable[0].message)
    assert "matmul falls back to the kernel's own configs" in message, message
    assert "serving defaults" not in message
    assert unreadable[0].filename == __file__  # it points at the launch, not the lookup


def test_a_stored_config_missing_a_meta_parameter_is_not_guessed(export):
    needs_more = triton.Config({**OWN.kwargs, "SPLIT_K": 1})
    kernel = autotune(configs=[needs_more], key=["M", "N", "K"], name="matmul",
                      source=export)(_matmul_kernel)
    a = torch.empty(1)
    assert kernel.tuned_config(a, a, a, a, a, a, a, 64, 64, 64) is None


def test_a_launch_says_which_config_and_tier_it_used(export, monkeypatch, capsys, caplog):
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    kernel = autotune(configs=[OWN], key=["M", "N", "K"], name="matmul",
                      source=export)(_matmul_kernel)
    with caplog.at_level("INFO", logger="tuner.autotune"):
        _matmul(kernel, 48, 48, 48)
        _matmul(kernel, 48, 48, 48)  # said once per key
    printed = capsys.readouterr().err
    line = ("tuner.autotune: matmul M=48,N=48,K=48 fp32: tier bucket (tuned for "
            "M=64,N=64,K=64 on cpu): BLOCK_M=16 BLOCK_N=32 BLOCK_K=16 GROUP_M=2 num_warps=2")
    assert printed.count(line) == 1, printed
    assert [r.getMessage() for r in caplog.records].count(printed.strip()) == 1
    a = torch.empty(48, 48)
    served = kernel.served(a, a, a, a, a, a, a, 48, 48, 48)
    assert served["tier"] == "bucket" and served["tuned_for"] == {"M": 64, "N": 64, "K": 64}
    assert served["config"]["BLOCK_M"] == 16 and served["device_kind"] == "cpu"
    own = autotune(configs=[OWN], key=["M", "N", "K"], name="matmul", dtype="bf16",
                   source=export)(_matmul_kernel)
    _matmul(own, 64, 64, 64)
    assert own.served(a, a, a, a, a, a, a, 64, 64, 64)["tier"] == "fallback"
    assert "the kernel's own configs (nothing tuned for it)" in capsys.readouterr().err


def test_tuner_autotune_stays_the_decorator_after_its_module_is_imported() -> None:
    """``tuner.autotune`` is the decorator on every access: its module lives in
    ``tuner.serving``, so importing that module cannot rebind the package attribute (it did when
    the module was ``tuner/autotune.py``: the second access returned the module)."""
    import importlib

    import tuner

    first = tuner.autotune
    importlib.import_module("tuner.serving.autotune")
    assert callable(first) and tuner.autotune is first
    assert tuner.best_config is tuner.best_config
