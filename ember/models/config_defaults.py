"""Defaults for keys a config.json leaves out: transformers' own, one table per architecture.

Mirrors ``DeepseekV3Config``, ``Glm4MoeConfig`` and ``GlmMoeDsaConfig`` (transformers 5.x), so a
short config means to ember exactly what it means to the transformers oracle. The only place
model defaults live.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ember.models.config import DEEPSEEK_V3, GLM4_MOE, GLM_MOE_DSA

_COMMON: Mapping[str, Any] = MappingProxyType(
    {
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "norm_topk_prob": True,
        "n_shared_experts": 1,
        "rope_theta": 10000.0,
        "pad_token_id": None,
    }
)
# transformers' own defaults (DeepseekV3Config, Glm4MoeConfig, GlmMoeDsaConfig), one table each.
DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        DEEPSEEK_V3: MappingProxyType(
            {
                **_COMMON,
                "vocab_size": 129280,
                "hidden_size": 7168,
                "intermediate_size": 18432,
                "moe_intermediate_size": 2048,
                "num_hidden_layers": 61,
                "num_attention_heads": 128,
                "n_routed_experts": 256,
                "routed_scaling_factor": 2.5,
                "kv_lora_rank": 512,
                "q_lora_rank": 1536,
                "qk_rope_head_dim": 64,
                "v_head_dim": 128,
                "qk_nope_head_dim": 128,
                "n_group": 8,
                "topk_group": 4,
                "num_experts_per_tok": 8,
                "first_k_dense_replace": 3,
                "max_position_embeddings": 4096,
                "rms_norm_eps": 1e-6,
                "bos_token_id": 0,
                "eos_token_id": 1,
                "rope_interleave": True,
                "num_nextn_predict_layers": 1,
            }
        ),
        GLM4_MOE: MappingProxyType(
            {
                **_COMMON,
                "vocab_size": 151552,
                "hidden_size": 4096,
                "intermediate_size": 10944,
                "num_hidden_layers": 46,
                "num_attention_heads": 96,
                "num_key_value_heads": 8,
                "max_position_embeddings": 131072,
                "rms_norm_eps": 1e-5,
                "moe_intermediate_size": 1408,
                "num_experts_per_tok": 8,
                "n_routed_experts": 128,
                "routed_scaling_factor": 1.0,
                "n_group": 1,
                "topk_group": 1,
                "first_k_dense_replace": 1,
                "use_qk_norm": False,
                "bos_token_id": None,
                "eos_token_id": None,
                "partial_rotary_factor": 0.5,
                "num_nextn_predict_layers": 1,
            }
        ),
        GLM_MOE_DSA: MappingProxyType(
            {
                **_COMMON,
                "vocab_size": 154880,
                "hidden_size": 6144,
                "intermediate_size": 12288,
                "moe_intermediate_size": 2048,
                "num_hidden_layers": 78,
                "num_attention_heads": 64,
                "n_routed_experts": 256,
                "routed_scaling_factor": 2.5,
                "kv_lora_rank": 512,
                "q_lora_rank": 2048,
                "qk_rope_head_dim": 64,
                "v_head_dim": 256,
                "qk_nope_head_dim": 192,
                "n_group": 1,
                "topk_group": 1,
                "num_experts_per_tok": 8,
                "max_position_embeddings": 202752,
                "rms_norm_eps": 1e-5,
                "bos_token_id": 0,
                "eos_token_id": 1,
                "index_topk": 2048,
                "index_head_dim": 128,
                "index_n_heads": 32,
                "first_k_dense_replace": 3,
                "num_nextn_predict_layers": 0,
                "index_topk_freq": 1,
                "index_skip_topk_offset": 2,
            }
        ),
    }
)
