"""``DeepseekV3ForCausalLM``: Kimi K2.x (and DeepSeek-V3): MLA attention + sigmoid-routed MoE."""

from __future__ import annotations

from torch import nn

from ember.models.arch.base import CausalLM
from ember.models.config import ModelConfig
from ember.models.layers.mla import MLAttention


class DeepseekV3ForCausalLM(CausalLM):
    """Every layer: MLA (q/kv LoRA, nope/rope split, interleaved rotary, YaRN mscale)."""

    @staticmethod
    def make_attention(config: ModelConfig, layer_idx: int) -> nn.Module:
        return MLAttention(config, layer_idx)
