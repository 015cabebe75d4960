"""A transformer MLP block from torch.nn, run forward a few times: `tuner profile` input.

    tuner profile examples/mlp_block.py --device-kind h100-sxm

x (tokens × d) → Linear(d, 4d) → GELU → Linear(4d, d) → + x → LayerNorm(d).
"""

from __future__ import annotations

import torch
from torch import nn

TOKENS, D = 256, 256


class MLPBlock(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.up = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.down(self.act(self.up(x))) + x)


def main(steps: int = 3) -> None:
    torch.manual_seed(0)
    block = MLPBlock(D).eval()
    x = torch.randn(TOKENS, D)
    with torch.no_grad():
        for _ in range(steps):
            block(x)


if __name__ == "__main__":
    main()
