"""The three shipped checkpoints: their config.json and the family each speaks.

Shapes mirror cpu-anchors.md's tiny models (vocab 8192, hidden 256, 4 layers with one dense,
16 routed experts top-4 + 1 shared, MLA dims of kimi-tiny, GQA dims of glm4moe-tiny, DSA as
glmdsa-tiny) so anchor numbers compare like with like, with two deliberate differences:

* kimi-tiny uses YaRN rope scaling with Kimi K2's parameters (beta_fast = beta_slow = mscale =
  mscale_all_dim = 1): trained on ``SEQ_LEN``-token windows, extended by ``YARN_FACTOR`` to
  ``max_position_embeddings``;
* glmdsa-tiny's ``index_topk`` is 128, so within the 512-token training windows three quarters of
  the positions really attend to an indexer-selected subset (2048 would never select anything).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ember.models.training.families import GLM, KIMI, VOCAB_SIZE, ChatFamily
from ember.models.training.trainer import TrainSettings

SEQ_LEN = 512
YARN_FACTOR = 8
MAX_POSITIONS = SEQ_LEN * YARN_FACTOR  # 4096, as the anchors' models
DSA_INDEX_TOPK = 128
TRAIN_STEPS = 750  # x 8 windows x 512 tokens: about 3.1M tokens per checkpoint
# A DSA step costs about twice a plain MLA step on CPU (the indexer's scores and its KL loss to
# the dense attention, per layer): glmdsa-tiny gets 300 steps (1.2M tokens) so that it trains in
# about the CPU time of the other two.
DSA_TRAIN_STEPS = 300
DSA_DENSE_WARMUP = 50  # dense attention while the indexer learns to imitate it

_SHARED: dict[str, Any] = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "first_k_dense_replace": 1,
    "intermediate_size": 768,
    "moe_intermediate_size": 128,
    "n_routed_experts": 16,
    "num_experts_per_tok": 4,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "scoring_func": "sigmoid",
    "topk_method": "noaux_tc",
    "norm_topk_prob": True,
    "moe_layer_freq": 1,
    "tie_word_embeddings": False,
    "max_position_embeddings": MAX_POSITIONS,
    "num_nextn_predict_layers": 0,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "use_cache": True,
}
_MLA: dict[str, Any] = {
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 128,
    "kv_lora_rank": 64,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "v_head_dim": 32,
}


@dataclass(frozen=True, slots=True)
class CheckpointSpec:
    """One shipped checkpoint: directory name, config.json contents, chat family."""

    name: str
    family: ChatFamily
    hf_config: dict[str, Any]
    settings: TrainSettings


def _token_ids(family: ChatFamily, first_special_id: int) -> dict[str, Any]:
    specials = family.all_special_tokens()

    def tid(token: str) -> int:
        return first_special_id + specials.index(token)

    return {
        "bos_token_id": tid(family.bos_token) if family.bos_token else None,
        "eos_token_id": [tid(t) for t in family.stop_tokens],
        "pad_token_id": tid(family.pad_token),
    }


def _kimi() -> dict[str, Any]:
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",  # transformers loads it natively (no remote code)
        **_SHARED,
        **_MLA,
        "routed_scaling_factor": 2.827,
        "rope_theta": 50000.0,
        "rope_interleave": True,
        "rope_scaling": {
            "type": "yarn",
            "factor": float(YARN_FACTOR),
            "original_max_position_embeddings": SEQ_LEN,
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        "rms_norm_eps": 1e-6,
    }


def _glm4moe() -> dict[str, Any]:
    return {
        "architectures": ["Glm4MoeForCausalLM"],
        "model_type": "glm4_moe",
        **_SHARED,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "partial_rotary_factor": 0.5,
        "use_qk_norm": True,
        "attention_bias": True,
        "routed_scaling_factor": 2.5,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "rms_norm_eps": 1e-5,
    }


def _glmdsa() -> dict[str, Any]:
    return {
        "architectures": ["GlmMoeDsaForCausalLM"],
        "model_type": "glm_moe_dsa",
        **_SHARED,
        **_MLA,
        "routed_scaling_factor": 2.5,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "rms_norm_eps": 1e-5,
        "index_n_heads": 4,
        "index_head_dim": 64,
        "index_topk": DSA_INDEX_TOPK,
        "indexer_types": ["full"] * 4,
    }


def checkpoint_specs(first_special_id: int) -> dict[str, CheckpointSpec]:
    """All shipped checkpoints by directory name; special ids start at ``first_special_id``."""
    specs = (
        CheckpointSpec("kimi-tiny", KIMI, _kimi(), TrainSettings(steps=TRAIN_STEPS, seed=1)),
        CheckpointSpec("glm4moe-tiny", GLM, _glm4moe(), TrainSettings(steps=TRAIN_STEPS, seed=2)),
        CheckpointSpec(
            "glmdsa-tiny",
            GLM,
            _glmdsa(),
            TrainSettings(steps=DSA_TRAIN_STEPS, seed=3, dense_warmup_steps=DSA_DENSE_WARMUP),
        ),
    )
    for spec in specs:
        spec.hf_config.update(_token_ids(spec.family, first_special_id))
    return {s.name: s for s in specs}
