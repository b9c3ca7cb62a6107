"""Tiny random configs of the three architectures and a weight randomiser for tests."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

YARN = {
    "rope_type": "yarn",
    "rope_theta": 10000.0,
    "factor": 8.0,
    "original_max_position_embeddings": 64,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "beta_fast": 32,
    "beta_slow": 1,
}
_COMMON: dict[str, Any] = {
    "vocab_size": 97,
    "hidden_size": 64,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "n_routed_experts": 8,
    "num_experts_per_tok": 3,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "routed_scaling_factor": 2.5,
    "norm_topk_prob": True,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-6,
    "n_group": 1,
    "topk_group": 1,
}
_MLA: dict[str, Any] = {
    "num_key_value_heads": 4,
    "kv_lora_rank": 16,
    "q_lora_rank": 24,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 12,
}


def kimi(**overrides: Any) -> dict[str, Any]:
    """DeepseekV3 (Kimi K2 shape): MLA + MoE, YaRN, group-limited routing.

    model_type "deepseek_v3", not Kimi's "kimi_k2": transformers maps per-expert checkpoint
    tensors onto its fused experts only for model types it knows.
    """
    base = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}
    base.update(_COMMON, **_MLA)
    base.update(n_group=2, topk_group=1, rope_parameters=dict(YARN), rope_interleave=True)
    return base | overrides


def glm4(**overrides: Any) -> dict[str, Any]:
    """Glm4Moe: GQA with q/k norm, q/k/v bias and partial rotary."""
    base = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", **_COMMON}
    base.update(
        num_key_value_heads=2,
        head_dim=16,
        use_qk_norm=True,
        attention_bias=True,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5,
        },
    )
    return base | overrides


def glmdsa(**overrides: Any) -> dict[str, Any]:
    """GlmMoeDsa: MLA + a DSA indexer keeping 4 tokens, with one shared-indexer layer."""
    base = {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", **_COMMON}
    base.update(_MLA)
    base.update(
        index_topk=4,
        index_head_dim=16,
        index_n_heads=8,
        indexer_types=["full", "shared", "full"],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    return base | overrides


ALL = {"kimi": kimi, "glm4": glm4, "glmdsa": glmdsa}


@torch.no_grad()
def randomize_(model: nn.Module, seed: int) -> None:
    """Weights at 1/sqrt(fan_in) (so attention and routing matter), norms near 1, small biases,
    and a non-zero router score correction (so the bias path is exercised)."""
    gen = torch.Generator().manual_seed(seed)
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if "inv_freq" in name:
            continue
        noise = torch.randn(tensor.shape, generator=gen)
        if tensor.dim() >= 2:
            tensor.copy_(noise / tensor.shape[-1] ** 0.5)
        elif name.endswith("bias"):
            tensor.copy_(noise * 0.1)
        else:
            tensor.copy_(1 + noise * 0.1)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref|."""
    return float((out.float() - ref.float()).abs().max() / ref.float().abs().max())
