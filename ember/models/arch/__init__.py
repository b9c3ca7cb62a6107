"""The three architectures and how to build one.

Usage (training, tests, the engine)::

    from ember.models.arch import build_model
    from ember.models.config_parse import parse_config, load_config
    from ember.models.loader import load_model, save_checkpoint

    config = parse_config({"architectures": ["DeepseekV3ForCausalLM"], ...})  # config.json keys
    model = build_model(config)                  # random init (normal(0, initializer_range))
    logits = model.reference_forward(ids)        # ids (B, S) -> (B, S, vocab); differentiable
    save_checkpoint(model, "out/dir")            # config.json + model.safetensors (+ generation)
    loaded = load_model("out/dir")               # loaded.model, loaded.config, ...

``build_model(config, device="meta")`` builds a full-size model without allocating (accounting).
Every projection is a plain ``nn.Linear`` and every routed expert its own ``MLP`` module
(``model.layers.<i>.mlp.experts.<e>.{gate,up,down}_proj``), so quantization can swap modules by
name. The router (``mlp.gate``) is deliberately not an ``nn.Linear`` and stays float32.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import torch
from torch import nn

from ember.models.arch.base import CausalLM
from ember.models.arch.deepseek_v3 import DeepseekV3ForCausalLM
from ember.models.arch.glm4_moe import Glm4MoeForCausalLM
from ember.models.arch.glm_moe_dsa import GlmMoeDsaForCausalLM
from ember.models.config import DEEPSEEK_V3, GLM4_MOE, GLM_MOE_DSA, ModelConfig
from ember.models.layers.moe import TopkRouter
from ember.models.layers.norm import RMSNorm

REGISTRY: Mapping[str, type[CausalLM]] = MappingProxyType(
    {
        DEEPSEEK_V3: DeepseekV3ForCausalLM,
        GLM4_MOE: Glm4MoeForCausalLM,
        GLM_MOE_DSA: GlmMoeDsaForCausalLM,
    }
)

__all__ = ["REGISTRY", "CausalLM", "build_model", "init_weights"]


def build_model(
    config: ModelConfig,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    init: bool = True,
) -> CausalLM:
    """Instantiate ``config``'s architecture.

    ``device="meta"`` allocates nothing (shapes only). Otherwise the weights are initialised like
    transformers does (``init_weights``) unless ``init=False`` (the loader overwrites them anyway).
    ``dtype`` casts everything except the float32 routers.
    """
    cls = REGISTRY[config.architecture]
    with torch.device(device or "cpu"):
        model = cls(config)
    if init and str(device) != "meta":
        init_weights(model, config.initializer_range)
    if dtype is not None:
        model.to(dtype)
    return model


@torch.no_grad()
def init_weights(model: nn.Module, std: float) -> None:
    """normal(0, std) for projections, embeddings and routers; zeros for biases and the router's
    score correction; ones for norm weights (transformers' ``_init_weights`` for these models)."""
    for module in model.modules():
        if isinstance(module, nn.Linear | nn.Embedding | TopkRouter):
            module.weight.normal_(0.0, std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.zero_()
        if isinstance(module, TopkRouter):
            module.e_score_correction_bias.zero_()
        if isinstance(module, RMSNorm | nn.LayerNorm):
            module.weight.fill_(1.0)
        if isinstance(module, nn.LayerNorm) and module.bias is not None:
            module.bias.zero_()
