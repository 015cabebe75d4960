"""A pre-norm transformer block built from torch.nn, run forward a few times: the input of
`tuner profile` and `tuner plan`.

    tuner profile examples/transformer_block.py --device-kind h100-sxm
    tuner plan examples/transformer_block.py --device-kind h100-sxm

Attention: LayerNorm → Linear(d, 3d) → scaled_dot_product_attention (causal) → Linear(d, d)
→ + residual; MLP: Linear(d, 4d) → GELU → Linear(4d, d) → + residual → LayerNorm.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

BATCH, SEQ, D, HEADS = 2, 128, 256, 4


class TransformerBlock(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.up = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * d, d)
        self.norm2 = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, d))
        return self.norm2(self.down(self.act(self.up(x))) + x)


def main(steps: int = 3) -> None:
    torch.manual_seed(0)
    block = TransformerBlock(D, HEADS).eval()
    x = torch.randn(BATCH, SEQ, D)
    with torch.no_grad():
        for _ in range(steps):
            block(x)


if __name__ == "__main__":
    main()
