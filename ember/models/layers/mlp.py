"""The SwiGLU feed-forward block: dense layers, every routed expert and the shared experts.

Inference runs ``gate_proj`` and ``up_proj`` as one matmul over their joined rows
(``fused.JoinedLinears``); ``forward_reference`` keeps the two calls and is what autograd uses.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ember.models.layers.fused import JoinedLinears


class MLP(nn.Module):
    """``down_proj(silu(gate_proj(x)) * up_proj(x))``, three plain ``nn.Linear`` without bias."""

    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self._gate_up = JoinedLinears()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        joined = self._gate_up.get(self.gate_proj, self.up_proj)
        if joined is None:
            return self.forward_reference(x)
        gate, up = F.linear(x, *joined).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)

    def forward_reference(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
