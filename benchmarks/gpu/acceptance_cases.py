"""The cases of the GPU acceptance run and the baselines each is compared with.

Per case: the service's kernel and problem, and the implementations timed beside the tuned
kernel in the same process:

* ``torch``: torch's own implementation (cuBLAS for matmuls, ATen kernels otherwise);
* ``triton-default``: the same Triton kernel with Triton's tutorial choice — for a matmul the
  fastest of the tutorial's autotune list (what ``@triton.autotune`` over it would pick), for
  row-wise kernels the tutorials' rule (one block spans the row, warps by block size), for the
  chain the epilogue grouping with those two;
* ``torch.compile``: ``torch.compile(mode="max-autotune")`` of the torch implementation, where
  it finishes within the time left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import torch
import torch.nn.functional as F

from search_spaces import Context
from search_spaces.matmul import tutorial_configs
from tuner.kernels.rowwise import EPS

Tensors = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Case:
    """One acceptance case: a service kernel, its problem, dtype and trial budget."""

    name: str
    kernel: str
    problem: dict[str, int]
    dtype: str
    trials: int
    family: str  # "matmul", "rowwise" or "chain"
    notes: list[str] = field(default_factory=list)
    #: time torch.compile(mode="max-autotune") beside it (its autotuning costs ~0.5-1 min)
    max_autotune: bool = True
    #: compile processes of the tuning run (None: the default; 0: serial, the GPU compiles)
    compile_procs: int | None = None
    #: time the tuned kernel against the baselines (off for a repeat of a case)
    baselines: bool = True

    @property
    def shape(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.problem.items())


def full_cases() -> list[Case]:
    """The issue's list, most telling first (a run out of time drops the tail): bf16 matmuls
    (incl. a decode shape), the 4096^3 matmul tuned again serially (the device-busy
    comparison), rmsnorm and softmax at three row lengths, and the fused chain.
    ``torch.compile(mode="max-autotune")`` runs beside the two large matmuls, the 4096-wide
    rows and the chain (its own autotuning costs about a minute a case)."""
    def mm(name: str, m: int, n: int, k: int, trials: int, **kw: Any) -> Case:
        return Case(name, "matmul", {"M": m, "N": n, "K": k}, "bf16", trials, "matmul", **kw)

    def rows(kernel: str, n: int) -> Case:
        return Case(f"{kernel} 16384x{n}", kernel, {"M": 16384, "N": n}, "bf16", 8, "rowwise",
                    max_autotune=n == 4096)

    return [mm("matmul 8192^3", 8192, 8192, 8192, 20),
            mm("matmul 4096^3", 4096, 4096, 4096, 20),
            mm("matmul 4096^3 serial", 4096, 4096, 4096, 20, compile_procs=0,
               baselines=False, max_autotune=False),
            rows("rmsnorm", 4096), rows("softmax", 4096),
            mm("matmul 4096x4096x512", 4096, 4096, 512, 12, max_autotune=False),
            mm("matmul decode 16x4096x4096", 16, 4096, 4096, 12, max_autotune=False),
            rows("rmsnorm", 1024), rows("softmax", 1024),
            rows("rmsnorm", 16384), rows("softmax", 16384),
            Case("chain 8192x256x4096", "linear+bias+gelu+residual+layernorm",
                 {"M": 8192, "N": 256, "K": 4096}, "bf16", 12, "chain")]


def tiny_cases() -> list[Case]:
    """The same kinds of case at interpreter sizes (the script's own test)."""
    return [Case("matmul 64^3", "matmul", {"M": 64, "N": 64, "K": 64}, "fp16", 3, "matmul"),
            Case("matmul decode 16x64x64", "matmul", {"M": 16, "N": 64, "K": 64}, "fp16", 2,
                 "matmul"),
            Case("matmul 64^3 serial", "matmul", {"M": 64, "N": 64, "K": 64}, "fp16", 3,
                 "matmul", compile_procs=0, baselines=False),
            Case("rmsnorm 8x200", "rmsnorm", {"M": 8, "N": 200}, "fp16", 2, "rowwise"),
            Case("softmax 8x200", "softmax", {"M": 8, "N": 200}, "fp16", 2, "rowwise"),
            Case("chain 16x32x16", "linear+bias+gelu+residual+layernorm",
                 {"M": 16, "N": 32, "K": 16}, "fp16", 3, "chain")]


def torch_impl(case: Case) -> Callable[[Tensors], Any]:
    """torch's own implementation of the case, on the kernel's input tensors."""
    n = case.problem.get("N", 0)
    if case.family == "matmul":
        return lambda t: torch.matmul(t["a"], t["b"])
    if case.kernel == "softmax":
        return lambda t: torch.softmax(t["x"], dim=-1)
    if case.kernel == "rmsnorm":
        return lambda t: F.rms_norm(t["x"], (n,), t["w"], EPS)
    return lambda t: F.layer_norm(F.gelu(torch.addmm(t["bias"], t["a"], t["b"]))
                                  + t["residual"], (n,), t["ln_w"], t["ln_b"], EPS)


def _row_rule(n: int, elem_bytes: int) -> dict[str, int]:
    """The Triton tutorials' row-kernel rule: one block spans the row (at most 64 KB), warps
    by block size (softmax: 4, 8 from 2048, 16 from 4096; here the layernorm tutorial's
    ``min(max(BLOCK // 256, 1), 8)`` for both)."""
    block = max(16, 1 << max(0, n - 1).bit_length())
    block = min(block, 65536 // elem_bytes)
    return {"BLOCK_N": block, "num_warps": min(max(block // 256, 1), 8)}


def default_configs(case: Case, ctx: Context, space: Any) -> list[dict[str, Any]]:
    """Triton's default candidates for the case, valid for this problem and device."""
    elem = ctx.elem_bytes
    if case.family == "matmul":
        found = [c for c in tutorial_configs() if space.is_valid(c, ctx)]
        return found or [{"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 8,
                          "num_warps": 2, "num_stages": 2}]
    rule = _row_rule(case.problem["N"], elem)
    if case.family == "rowwise":
        return [rule]
    mm = [c for c in tutorial_configs() if space.is_valid(
        {**c, "grouping": "epilogue", "LN_BLOCK_N": rule["BLOCK_N"],
         "LN_WARPS": rule["num_warps"]}, ctx)]
    base = mm[0] if mm else {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 8,
                             "num_warps": 2, "num_stages": 2}
    return [{**base, "grouping": "epilogue", "LN_BLOCK_N": rule["BLOCK_N"],
             "LN_WARPS": rule["num_warps"]}]
