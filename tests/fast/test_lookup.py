"""Production lookup from an export file: tiers, device kinds, staleness, the generated module
and the production helpers."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tuner.serving.export import python_module
from tuner.serving.lookup import best_config
from tuner.serving.lookup import clear_cache
from tuner.serving.production import triton_configs
from tuner.serving.production import tuned

TRITON = importlib.metadata.version("triton")


def _entry(problem, config, fraction, kind="h100-sxm", triton=TRITON, dtype="bf16"):
    return {"kernel": "matmul", "problem": problem, "problem_key": "", "problem_hash": "",
            "dtype": dtype, "device_kind": kind, "backend": "cuda", "config": config,
            "fraction": fraction, "median_ms": 1.0, "trial_id": 1, "job_id": 1,
            "updated_at": "", "fingerprint": {"triton": triton}}


A = {"BLOCK_M": 128, "num_warps": 8}
B = {"BLOCK_M": 64, "num_warps": 4}
C = {"BLOCK_M": 32, "num_warps": 2}
DEFAULT = {"BLOCK_M": 16, "num_warps": 2}


@pytest.fixture()
def export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An export of H100 and A100 entries, looked up from a process whose device is an H100."""
    monkeypatch.setenv("TUNER_DEVICE_KIND", "h100-sxm")
    clear_cache()
    doc = {"schema": 1, "exported_at": "2026-12-03T00:00:00Z", "source": "test",
           "configs": [
               _entry({"M": 4096, "N": 4096, "K": 4096}, A, 0.8),
               _entry({"M": 4096, "N": 4096, "K": 4096}, B, 0.6, kind="a100-80gb"),
               _entry({"M": 512, "N": 512, "K": 512}, B, 0.5),
               _entry({"M": 16, "N": 4096, "K": 4096}, C, 0.3, triton="0.0.1"),
           ],
           "defaults": {"matmul": DEFAULT}}
    path = tmp_path / "best.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_tiers_in_order(export):
    exact = best_config("matmul", {"M": 4096, "N": 4096, "K": 4096}, "bf16", source=export)
    assert exact == A and exact.tier == "exact" and exact.device_kind == "h100-sxm"
    # 3000 and 4096 share the power-of-two bucket 4096.
    bucket = best_config("matmul", {"M": 3000, "N": 4096, "K": 4096}, "bf16", source=export)
    assert bucket == A and bucket.tier == "bucket"
    assert bucket.problem == {"M": 4096, "N": 4096, "K": 4096}
    # 600 is nearer (in log space) to 512 than to 4096.
    nearest = best_config("matmul", {"M": 600, "N": 700, "K": 300}, "bf16", source=export)
    assert nearest == B and nearest.tier == "nearest"
    off = best_config("matmul", {"M": 3000, "N": 4096, "K": 4096}, "bf16", source=export,
                      bucket="none")
    assert off is not None and off.tier == "nearest"
    default = best_config("matmul", {"M": 1, "N": 1, "K": 1}, "fp16", source=export)
    assert default == DEFAULT and default.tier == "default"
    given = best_config("softmax", {"M": 1, "N": 1}, "fp16", source=export, default={"X": 1})
    assert given == {"X": 1} and given.tier == "default"
    assert best_config("softmax", {"M": 1, "N": 1}, "fp16", source=export) is None


def test_device_kind_selects_its_own_entries(export):
    a100 = best_config("matmul", {"M": 4096, "N": 4096, "K": 4096}, "bf16", "a100-80gb",
                       source=export)
    assert a100 == B and a100.tier == "exact"


def test_a_stale_fingerprint_is_flagged(export):
    fresh = best_config("matmul", {"M": 4096, "N": 4096, "K": 4096}, "bf16", source=export)
    assert fresh is not None and fresh.stale is False and fresh.stale_reasons == []
    old = best_config("matmul", {"M": 16, "N": 4096, "K": 4096}, "bf16", source=export)
    assert old is not None and old.stale is True
    assert old.stale_reasons == [f"triton 0.0.1 → {TRITON}"]


def test_answers_are_cached_and_callers_cannot_corrupt_them(export):
    first = best_config("matmul", {"M": 512, "N": 512, "K": 512}, "bf16", source=export)
    assert first is not None
    first["BLOCK_M"] = 1
    again = best_config("matmul", {"M": 512, "N": 512, "K": 512}, "bf16", source=export)
    assert again == B and again.tier == "exact"


def test_generated_module_is_self_contained(export, tmp_path):
    module = tmp_path / "tuned_configs.py"
    module.write_text(python_module(json.loads(Path(export).read_text())))
    code = ("import json, sys, tuned_configs as t; print(json.dumps([t.best_config('matmul', "
            "{'M': 4096, 'N': 4096, 'K': 4096}, 'bf16', 'a100-80gb'), t.best_config('matmul', "
            "{'M': 600, 'N': 700, 'K': 300}, 'bf16'), 'tuner' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [B, B, False]


def test_triton_configs_and_the_tuned_decorator(export):
    configs = triton_configs("matmul", "bf16", "h100-sxm", top_k=2, source=export)
    assert [(c.kwargs, c.num_warps) for c in configs] == [({"BLOCK_M": 128}, 8),
                                                           ({"BLOCK_M": 64}, 4)]
    with pytest.raises(LookupError):
        triton_configs("softmax", "bf16", source=export)

    @tuned("matmul", problem=lambda m, n, k: {"M": m, "N": n, "K": k}, dtype="bf16",
           device_kind="h100-sxm", source=export)
    def launch(m, n, k, *, config=None):
        return dict(config)

    assert launch(4096, 4096, 4096) == A
    assert launch(4096, 4096, 4096, config={"BLOCK_M": 1}) == {"BLOCK_M": 1}


def test_lookup_imports_nothing_heavy(export):
    code = ("import sys; from tuner import best_config; "
            f"c = best_config('matmul', {{'M': 4096, 'N': 4096, 'K': 4096}}, 'bf16', "
            f"source={export!r}); "
            "print([m for m in ('optuna', 'celery', 'torch', 'triton', 'sqlalchemy') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_same_named_kernels_are_served_by_identity(tmp_path, monkeypatch):
    """Two kernels called ``softmax_kernel`` (a file edited, or two files) and the built-in
    name ``matmul`` claimed by a file kernel: each caller gets its own entry."""
    monkeypatch.setenv("TUNER_DEVICE_KIND", "h100-sxm")
    clear_cache()
    problem = {"M": 512, "N": 512, "K": 512}
    mine, theirs = {**_entry(problem, A, 0.5), "identity": "jit:aaa"}, \
        {**_entry(problem, B, 0.9), "identity": "jit:bbb"}
    for e in (mine, theirs):
        e["kernel"] = "softmax_kernel"
    forged = {**_entry(problem, C, 0.99), "identity": "file:ccc"}
    builtin = {**_entry(problem, DEFAULT, 0.4), "identity": "builtin"}
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"schema": 1, "exported_at": "", "source": "t",
                                "configs": [mine, theirs, forged, builtin]}))
    src = str(path)
    own = best_config("softmax_kernel", problem, "bf16", source=src, identity="jit:aaa")
    assert own == A and own.tier == "exact" and not own.stale
    edited = best_config("softmax_kernel", problem, "bf16", source=src, identity="jit:zzz")
    assert edited is not None and edited.stale
    assert edited.stale_reasons[0].startswith("kernel source changed")
    unnamed = best_config("softmax_kernel", problem, "bf16", source=src)
    assert unnamed is not None and "2 different kernels" in unnamed.stale_reasons[0]
    assert best_config("matmul", problem, "bf16", source=src) == DEFAULT  # never the forger's
    assert best_config("matmul", problem, "bf16", source=src, identity="file:ccc") == C
    assert best_config("matmul", problem, "bf16", source=src, identity="file:ddd") is None


def test_an_export_is_strict_json(tmp_path):
    from types import SimpleNamespace

    from tuner.serving.export import export_rows
    from tuner.serving.export import write_export

    def row(fraction: float) -> SimpleNamespace:
        return SimpleNamespace(kernel="k", kernel_identity="builtin", problem={"N": 1},
                               problem_key="N1", problem_hash="h", dtype="fp32",
                               device_kind="cpu", backend="interpret", config={"B": 1},
                               fraction=fraction, median_ms=1.0, fingerprint={}, trial_id=1,
                               job_id=1, updated_at=__import__("datetime").datetime(2026, 1, 1))

    document = export_rows([row(0.5), row(float("inf")), row(float("nan"))], "t")
    assert [e["fraction"] for e in document["configs"]] == [0.5]
    with pytest.raises(ValueError):
        write_export({**document, "defaults": {"k": {"B": float("inf")}}}, tmp_path / "x.json")
    write_export(document, tmp_path / "ok.json")
    json.loads((tmp_path / "ok.json").read_text(), parse_constant=lambda c: 1 / 0)
