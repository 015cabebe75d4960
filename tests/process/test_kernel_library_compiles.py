"""Every library kernel compiles for Hopper (sm_90) on this CPU-only machine.

The interpreter accepts code that the compiler rejects (e.g. a kernel reading a plain global),
so each kernel and grouping is also compiled for real, through the static-check process,
with a typical config; the compiler's registers, spills and shared memory come back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tuner.core.types import BenchmarkRequest
from tuner.measure.bench_process import BenchProcess

MM = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
      "num_stages": 3}
ROWS = {"BLOCK_N": 2048, "num_warps": 8}
CASES: list[tuple[str, dict[str, int], str, dict[str, Any]]] = [
    ("softmax", {"M": 4096, "N": 2048}, "bf16", ROWS),  # one pass
    ("softmax", {"M": 4096, "N": 32768}, "fp16", ROWS),  # two passes
    ("layernorm", {"M": 4096, "N": 32768}, "bf16", ROWS),
    ("rmsnorm", {"M": 4096, "N": 2048}, "fp32", ROWS),
    ("attention", {"Z": 4, "H": 16, "S": 4096, "D": 128}, "bf16",
     {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}),
    ("attention_causal", {"Z": 4, "H": 16, "S": 4096, "D": 64}, "fp16",
     {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}),
    ("matmul+bias+gelu+residual", {"M": 4096, "N": 4096, "K": 4096}, "bf16", MM),
    ("matmul", {"M": 4096, "N": 4096, "K": 4096}, "fp8e4m3", {**MM, "BLOCK_K": 128}),
    ("linear+bias+gelu+residual+layernorm", {"M": 4096, "N": 256, "K": 4096}, "bf16",
     {"grouping": "full", "BLOCK_M": 64, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}),
    ("linear+bias+gelu+residual+layernorm", {"M": 4096, "N": 1024, "K": 4096}, "bf16",
     {"grouping": "unfused", **MM, "EW_BLOCK": 1024, "EW_WARPS": 4, "LN_BLOCK_N": 1024,
      "LN_WARPS": 4}),
    ("fused_moe", {"M": 64, "E": 8, "N": 1024, "K": 2048, "topk": 2}, "bf16",
     {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 16,
      "num_warps": 4, "num_stages": 3}),
    ("examples/autotuned_softmax.py:SOFTMAX_AUTOTUNED", {"M": 64, "N": 1000}, "fp16",
     {"BLOCK_N": 1024, "num_warps": 4, "num_stages": 1}),
]


@pytest.fixture(scope="module")
def compiler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BenchProcess]:
    proc = BenchProcess(compile_for="h100-sxm", cache_dir=Path(tmp_path_factory.mktemp("cc")),
                        kernel_roots=(ROOT,))
    try:
        yield proc
    finally:
        proc.close()


@pytest.mark.parametrize(("kernel", "problem", "dtype", "config"), CASES,
                         ids=[f"{c[0]}-{c[2]}-{c[3].get('grouping', '')}" for c in CASES])
def test_kernel_compiles_for_sm90(compiler, kernel, problem, dtype, config):
    result = compiler.check(BenchmarkRequest(
        trial_id=1, attempt=1, job_id=1, kernel=kernel, problem=problem, dtype=dtype,
        params=config, backend="cuda", device_kind="h100-sxm", mode="check"))
    assert result.status == "ok", result.error
    assert result.target == "sm_90" and result.spill_bytes == 0
    assert result.regs is not None and 0 < result.regs <= 255
    assert result.smem_bytes is not None and result.smem_bytes <= 232448
