"""``Glm4MoeForCausalLM``: GLM-4.5/4.6/4.7: grouped-query attention + sigmoid-routed MoE."""

from __future__ import annotations

from torch import nn

from ember.models.arch.base import CausalLM
from ember.models.config import ModelConfig
from ember.models.layers.gqa import GQAttention


class Glm4MoeForCausalLM(CausalLM):
    """Every layer: GQA with q/k/v bias, optional per-head q/k norm and partial rotary."""

    @staticmethod
    def make_attention(config: ModelConfig, layer_idx: int) -> nn.Module:
        return GQAttention(config, layer_idx)
