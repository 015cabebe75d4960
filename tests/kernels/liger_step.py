"""A small training step through Liger-Kernel's own Triton kernels (a real library, installed,
not vendored): RMSNorm, a SwiGLU and a GEGLU gate, LayerNorm and softmax, forward and backward.
Each forward is checked against torch before its backward runs (Liger's backwards write into
their inputs). Exit status 0 when every check held."""

from __future__ import annotations

import torch
from liger_kernel.ops.geglu import LigerGELUMulFunction
from liger_kernel.ops.layer_norm import LigerLayerNormFunction
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from liger_kernel.ops.softmax import LigerSoftmaxFunction
from liger_kernel.ops.swiglu import LigerSiLUMulFunction


def close(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def step(rows: int, hidden: int, ffn: int) -> None:
    x = torch.randn(rows, hidden, requires_grad=True)
    w = torch.rand(hidden, requires_grad=True)
    h = LigerRMSNormFunction.apply(x, w, 1e-6)
    close(h, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)
    gate, up = torch.randn(rows, ffn, requires_grad=True), torch.randn(rows, ffn)
    g = LigerSiLUMulFunction.apply(gate, up)
    close(g, torch.nn.functional.silu(gate) * up)
    a, b = torch.randn(rows, ffn, requires_grad=True), torch.randn(rows, ffn)
    e = LigerGELUMulFunction.apply(a, b)
    close(e, torch.nn.functional.gelu(a, approximate="tanh") * b)
    lw, lb = torch.rand(hidden, requires_grad=True), torch.randn(hidden, requires_grad=True)
    n = LigerLayerNormFunction.apply(h.detach().requires_grad_(), lw, lb, 1e-6)
    close(n, torch.nn.functional.layer_norm(h.detach(), (hidden,), lw, lb, 1e-6))
    p = LigerSoftmaxFunction.apply(g.detach().requires_grad_())
    close(p, torch.softmax(g.detach(), -1))
    (h.sum() + g.sum() + e.sum() + n.sum() + p.sum()).backward()


if __name__ == "__main__":
    torch.manual_seed(0)
    for _ in range(2):
        step(8, 64, 96)
    step(4, 48, 200)
