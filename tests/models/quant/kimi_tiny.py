"""The real Kimi (DeepseekV3) architecture at the tiny checkpoints' widths, random weights."""

from __future__ import annotations

import torch
from torch import nn

from ember.models.arch import build_model
from ember.models.config_parse import parse_config
from tests.models.tiny import kimi, randomize_

# hidden 256, dense 768, experts 128 (the tiny checkpoints); 2 layers: one dense, one MoE.
WIDTHS = {
    "hidden_size": 256,
    "intermediate_size": 768,
    "moe_intermediate_size": 128,
    "vocab_size": 2048,
    "num_hidden_layers": 2,
}


def build_kimi(seed: int, dtype: torch.dtype = torch.bfloat16, **overrides: object) -> nn.Module:
    model = build_model(parse_config(kimi(**(WIDTHS | overrides))))
    randomize_(model, seed)
    return model.to(dtype).eval()
