"""The tiny random-init configurations of cpu-anchors.md the engine benches build (vocab 8192,
hidden 256, 4 layers, 16 experts top-4): Kimi (DeepSeek-V3 MLA), GLM-4.x (GQA) and GLM-5.x
(MLA + DSA indexer), as HF ``config.json`` dicts."""

from __future__ import annotations

from typing import Any

_COMMON: dict[str, Any] = dict(
    vocab_size=8192,
    hidden_size=256,
    num_hidden_layers=4,
    first_k_dense_replace=1,
    intermediate_size=768,
    moe_intermediate_size=128,
    n_routed_experts=16,
    num_experts_per_tok=4,
    n_shared_experts=1,
    n_group=1,
    topk_group=1,
    norm_topk_prob=True,
    max_position_embeddings=4096,
    tie_word_embeddings=False,
    num_attention_heads=4,
)
_MLA: dict[str, Any] = dict(
    num_key_value_heads=4,
    q_lora_rank=128,
    kv_lora_rank=64,
    qk_nope_head_dim=32,
    qk_rope_head_dim=16,
    v_head_dim=32,
)
ARCHS: dict[str, dict[str, Any]] = {
    "kimi": dict(
        architectures=["DeepseekV3ForCausalLM"],
        model_type="deepseek_v3",
        **_COMMON,
        **_MLA,
        rope_interleave=True,
        routed_scaling_factor=2.827,
        rope_theta=5e4,
        rms_norm_eps=1e-6,
    ),
    "glm4": dict(
        architectures=["Glm4MoeForCausalLM"],
        model_type="glm4_moe",
        **_COMMON,
        num_key_value_heads=2,
        head_dim=64,
        partial_rotary_factor=0.5,
        use_qk_norm=True,
        attention_bias=True,
        routed_scaling_factor=2.5,
        rope_theta=1e6,
        rms_norm_eps=1e-5,
    ),
    "glmdsa": dict(
        architectures=["GlmMoeDsaForCausalLM"],
        model_type="glm_moe_dsa",
        **_COMMON,
        **_MLA,
        index_n_heads=4,
        index_head_dim=64,
        index_topk=2048,
        indexer_types=["full"] * 4,
        routed_scaling_factor=2.5,
        rope_theta=1e6,
        rms_norm_eps=1e-5,
    ),
}
