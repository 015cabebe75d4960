"""A production lookup never fails and never crosses device kinds silently; staleness covers
everything the fingerprint stores; exports speak ``triton.Config``."""

from __future__ import annotations

import functools
import json
import socket
import warnings
from pathlib import Path

import pytest
import triton

from search_spaces.canonical import stable_hash
from tuner.core.devices import local as local_device
from tuner.core.launch import triton_form
from tuner.serving.lookup import best_config
from tuner.serving.lookup import clear_cache
from tuner.serving.production import to_triton_config

BIG = {"M": 4096, "N": 4096, "K": 4096}
H100 = {"BLOCK_M": 128, "BLOCK_N": 256, "num_warps": 8, "num_stages": 4}
DEFAULT = {"BLOCK_M": 64, "num_warps": 4}


def _entry(config, kind="h100-sxm", **fingerprint):
    return {"kernel": "matmul", "problem": BIG, "dtype": "bf16", "device_kind": kind,
            "config": config, "fraction": 0.7, "fingerprint": fingerprint}


def _write(path: Path, *entries) -> str:
    path.write_text(json.dumps({"schema": 1, "exported_at": "", "source": "test",
                                "configs": list(entries), "defaults": {}}))
    return str(path)


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv("TUNER_DEVICE_KIND", raising=False)
    monkeypatch.delenv("TUNER_BEST_CONFIGS", raising=False)
    clear_cache()
    yield
    clear_cache()


def test_no_device_kind_means_this_process_device_and_crossing_is_explicit(tmp_path,
                                                                          monkeypatch):
    src = _write(tmp_path / "h100.json", _entry(H100))
    monkeypatch.setenv("TUNER_DEVICE_KIND", "cpu")
    clear_cache()
    assert best_config("matmul", BIG, "bf16", source=src) is None
    served = best_config("matmul", BIG, "bf16", source=src, default=DEFAULT)
    assert served == DEFAULT and served.tier == "default"
    crossed = best_config("matmul", BIG, "bf16", "any", source=src)
    assert crossed == H100 and crossed.crossed and crossed.stale
    assert crossed.stale_reasons[0] == "tuned on h100-sxm, this process runs on cpu"
    monkeypatch.setenv("TUNER_DEVICE_KIND", "h100-sxm")
    clear_cache()
    own = best_config("matmul", BIG, "bf16", source=src)
    assert own == H100 and not own.crossed and own.device_kind == "h100-sxm"


def test_an_export_single_kind_serves_when_this_device_is_only_a_guess(tmp_path, monkeypatch):
    src = _write(tmp_path / "h100.json", _entry(H100))
    monkeypatch.setattr(local_device, "_detect", functools.cache(lambda: ("cpu", False)))
    assert best_config("matmul", BIG, "bf16", source=src) == H100
    two = _write(tmp_path / "two.json", _entry(H100), _entry(DEFAULT, kind="a100-80gb"))
    assert best_config("matmul", BIG, "bf16", source=two) is None  # which one? neither


@pytest.mark.parametrize("kind", ["missing sqlite", "missing file", "corrupt file",
                                  "not an export", "unreachable postgres", "garbage url"])
def test_an_unreadable_source_serves_the_default_with_one_warning(tmp_path, kind):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    (tmp_path / "corrupt.json").write_text('{"schema": 1, "configs": [')
    (tmp_path / "other.json").write_text('{"hello": "world"}')
    source = {"missing sqlite": f"sqlite:///{tmp_path / 'none' / 'tuner.db'}",
              "missing file": str(tmp_path / "nope.json"),
              "corrupt file": str(tmp_path / "corrupt.json"),
              "not an export": str(tmp_path / "other.json"),
              "unreachable postgres": f"postgresql+psycopg://u:secret@127.0.0.1:{port}/db",
              "garbage url": "nonsense://what"}[kind]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = best_config("matmul", BIG, "bf16", source=source, default=DEFAULT)
        second = best_config("matmul", {"M": 8, "N": 8, "K": 8}, "bf16", source=source)
    assert first == DEFAULT and first.tier == "default"
    assert second is None
    ours = [w for w in caught if "tuner: cannot read tuned configs" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert "secret" not in str(ours[0].message)
    assert not (tmp_path / "none").exists()  # reading never creates a database


def test_the_default_source_is_resolved_once(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNER_DEVICE_KIND", "h100-sxm")
    monkeypatch.setenv("TUNER_BEST_CONFIGS", _write(tmp_path / "a.json", _entry(H100)))
    clear_cache()
    assert best_config("matmul", BIG, "bf16") == H100
    monkeypatch.setenv("TUNER_BEST_CONFIGS", str(tmp_path / "elsewhere.json"))
    assert best_config("matmul", BIG, "bf16") == H100  # resolved at the first call
    clear_cache()
    assert best_config("matmul", BIG, "bf16") is None


def test_staleness_covers_cuda_driver_capability_space_and_user_files(tmp_path, monkeypatch):
    from tuner.serving import staleness

    kernel_file = tmp_path / "my_kernel.py"
    kernel_file.write_text("# version 1\n")
    stored = dict(cuda="11.0", driver="535.1", compute_capability="8.0",
                  kernel_source_hash=stable_hash("# version 1\n"),
                  kernel_file=str(kernel_file), space_hash="not-the-current-space")
    src = _write(tmp_path / "e.json", _entry(H100, **stored))
    monkeypatch.setenv("TUNER_DEVICE_KIND", "h100-sxm")
    monkeypatch.setattr(staleness, "local_facts", lambda: {
        "cuda": "12.8", "driver": "550.2", "compute_capability": "9.0"})
    clear_cache()
    answer = best_config("matmul", BIG, "bf16", source=src)
    assert answer is not None
    assert answer.stale_reasons == ["CUDA 11.0 → 12.8", "driver 535.1 → 550.2",
                                    "compute capability 8.0 → 9.0", "search space changed"]
    kernel_file.write_text("# version 2\n")
    clear_cache()
    monkeypatch.setattr(staleness, "local_facts", lambda: {
        "cuda": "11.0", "driver": None, "compute_capability": None})
    edited = best_config("matmul", BIG, "bf16", source=src)
    assert edited is not None
    assert edited.stale_reasons == ["kernel source my_kernel.py changed",
                                    "search space changed"]


def test_the_current_space_hash_is_not_stale(tmp_path, monkeypatch):
    from tuner.kernels import load_kernel

    current = load_kernel("matmul").space.space_hash()
    src = _write(tmp_path / "e.json", _entry(H100, space_hash=current))
    monkeypatch.setenv("TUNER_DEVICE_KIND", "h100-sxm")
    clear_cache()
    answer = best_config("matmul", BIG, "bf16", source=src)
    assert answer is not None and answer.stale is False


def test_exports_speak_triton_config():
    form = triton_form(H100)
    assert form == {"kwargs": {"BLOCK_M": 128, "BLOCK_N": 256}, "num_warps": 8,
                    "num_stages": 4}
    config = triton.Config(**form)
    assert (config.kwargs, config.num_warps, config.num_stages) == (form["kwargs"], 8, 4)
    again = to_triton_config({"triton": form, "config": H100})
    assert (again.kwargs, again.num_warps, again.num_stages) == (form["kwargs"], 8, 4)
    flat = to_triton_config({"BLOCK_M": 16, "num_warps": 2, "maxnreg": 128})
    assert (flat.kwargs, flat.num_warps, flat.maxnreg) == ({"BLOCK_M": 16}, 2, 128)


def test_triton_configs_default_to_this_device_too(tmp_path, monkeypatch):
    from tuner.serving.production import triton_configs

    src = _write(tmp_path / "h100.json", _entry(H100))
    monkeypatch.setenv("TUNER_DEVICE_KIND", "cpu")
    clear_cache()
    with pytest.raises(LookupError):
        triton_configs("matmul", "bf16", source=src)
    (config,) = triton_configs("matmul", "bf16", "any", source=src)
    assert (config.kwargs, config.num_warps, config.num_stages) == (
        {"BLOCK_M": 128, "BLOCK_N": 256}, 8, 4)


def test_the_generated_module_gives_a_triton_config(tmp_path):
    import importlib.util

    from tuner.serving.export import python_module

    doc = {"exported_at": "", "source": "t", "configs": [_entry(H100)]}
    path = tmp_path / "tuned_configs.py"
    path.write_text(python_module(doc))
    spec = importlib.util.spec_from_file_location("tuned_configs_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.triton_config("matmul", BIG, "bf16", "h100-sxm")
    assert (config.kwargs, config.num_warps, config.num_stages) == (
        {"BLOCK_M": 128, "BLOCK_N": 256}, 8, 4)
    assert module.triton_config("matmul", BIG, "fp8e4m3") is None


def test_tuned_without_a_default_raises_why_instead_of_warning(tmp_path):
    """No default to serve: one ``LookupError`` naming the unreadable source, not a warning
    that promises defaults followed by an error."""
    from tuner.serving.production import tuned

    clear_cache()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")

    @tuned("matmul", problem=lambda n: {"M": n, "N": n, "K": n}, dtype="fp16",
           source=str(broken))
    def launch(n: int, *, config: dict) -> dict:
        return config

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(LookupError, match=r"no tuned config for matmul fp16: cannot read "
                                              r".*broken\.json"):
            launch(64)  # type: ignore[call-arg]
    assert caught == []
    clear_cache()
