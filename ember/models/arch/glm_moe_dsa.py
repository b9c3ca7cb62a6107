"""``GlmMoeDsaForCausalLM``: GLM-5.x: MLA + DeepSeek Sparse Attention indexer + MoE.

Layers marked ``"full"`` in ``indexer_types`` own an indexer that picks each query's top-k context
tokens; ``"shared"`` layers reuse the selection of the closest full layer before them. Attention
is MLA restricted to the selected tokens (dense while a sequence is within ``index_topk``).
"""

from __future__ import annotations

from torch import nn

from ember.models.arch.base import CausalLM
from ember.models.config import ModelConfig
from ember.models.layers.mla import MLAttention


class GlmMoeDsaForCausalLM(CausalLM):
    """Every layer: MLA (interleaved rotary) with an own or shared DSA token selection."""

    @staticmethod
    def make_attention(config: ModelConfig, layer_idx: int) -> nn.Module:
        return MLAttention(config, layer_idx)
