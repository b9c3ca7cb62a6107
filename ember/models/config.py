"""The typed model configuration every architecture is built from.

A checkpoint's ``config.json`` is parsed once (``ember.models.config_parse``) into a frozen
``ModelConfig``; model code reads only these fields, never the raw JSON. Defaults live in
``config_defaults.DEFAULTS`` (one table per architecture, mirroring transformers' config classes,
so a key missing from config.json means what it means to transformers).

Three architectures:

- ``DeepseekV3ForCausalLM`` (Kimi K2.x): multi-head latent attention (``mla``) + MoE.
- ``Glm4MoeForCausalLM`` (GLM-4.5/4.6/4.7): grouped-query attention (``gqa``) + MoE.
- ``GlmMoeDsaForCausalLM`` (GLM-5.x): MLA + the DSA sparse-attention ``indexer`` + MoE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

DEEPSEEK_V3 = "DeepseekV3ForCausalLM"
GLM4_MOE = "Glm4MoeForCausalLM"
GLM_MOE_DSA = "GlmMoeDsaForCausalLM"
ARCHITECTURES = (DEEPSEEK_V3, GLM4_MOE, GLM_MOE_DSA)

RopeKind = Literal["default", "yarn"]
IndexerType = Literal["full", "shared"]


@dataclass(frozen=True, slots=True)
class RopeConfig:
    """Rotary position embedding: which dims rotate and how the frequencies are scaled."""

    theta: float
    dim: int  # rotated dims per head (qk_rope_head_dim, or head_dim * partial_rotary_factor)
    interleaved: bool  # DeepSeek pairs (x0, x1), (x2, x3)...; GLM-4 pairs (x_i, x_{i + dim/2})
    kind: RopeKind = "default"
    factor: float = 1.0  # YaRN: context extension factor
    original_max_position_embeddings: int | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None  # explicit cos/sin scale; derived from mscale if None
    truncate: bool = True
    partial_rotary_factor: float | None = None  # GLM-4: kept to write config.json back unchanged


@dataclass(frozen=True, slots=True)
class MoEConfig:
    """Routed + shared experts with DeepSeek's sigmoid, bias-corrected, group-limited router."""

    n_routed_experts: int
    num_experts_per_tok: int
    n_shared_experts: int
    moe_intermediate_size: int
    n_group: int
    topk_group: int
    norm_topk_prob: bool
    routed_scaling_factor: float


@dataclass(frozen=True, slots=True)
class MLAConfig:
    """Multi-head latent attention: low-rank query and a cached KV latent plus a shared rope key."""

    q_lora_rank: int | None  # None: a plain q_proj (DeepSeek-V2-Lite style)
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass(frozen=True, slots=True)
class GQAConfig:
    """Grouped-query attention (GLM-4.x): optional per-head q/k RMSNorm and q/k/v bias."""

    num_key_value_heads: int
    head_dim: int
    use_qk_norm: bool


@dataclass(frozen=True, slots=True)
class IndexerConfig:
    """DeepSeek Sparse Attention indexer (GLM-5.x): picks ``index_topk`` context tokens per query.

    ``indexer_types[i]`` is ``"full"`` when layer ``i`` runs its own indexer and ``"shared"`` when
    it reuses the selection of the closest full layer before it (GLM-5.2 "IndexShare").
    """

    index_n_heads: int
    index_head_dim: int
    index_topk: int
    indexer_types: tuple[IndexerType, ...]

    @property
    def num_full_layers(self) -> int:
        return sum(1 for kind in self.indexer_types if kind == "full")


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Everything the model code needs, validated. Build one with ``config_parse.parse_config``."""

    architecture: str
    model_type: str
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int  # dense MLP layers
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool
    rope: RopeConfig
    moe: MoEConfig
    moe_layers: tuple[bool, ...]  # per layer: MoE block (True) or dense MLP (False)
    mla: MLAConfig | None = None
    gqa: GQAConfig | None = None
    indexer: IndexerConfig | None = None
    num_nextn_predict_layers: int = 0  # MTP layers stored after the last layer; ember skips them
    initializer_range: float = 0.02
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    torch_dtype: str | None = None
    quantization_method: str | None = None  # quantization_config.quant_method of the checkpoint
    weight_prefix: str = ""  # "language_model." when config.json wraps a text_config (Kimi K2.5)
    source: str = field(default="<dict>", compare=False)  # the file it came from, for errors

    @property
    def first_k_dense_replace(self) -> int:
        return next((i for i, is_moe in enumerate(self.moe_layers) if is_moe), len(self.moe_layers))

    @property
    def num_moe_layers(self) -> int:
        return sum(self.moe_layers)

    def to_hf_dict(self) -> dict[str, Any]:
        """The config.json that transformers (>= 5.2) and ``parse_config`` both read back."""
        out: dict[str, Any] = {
            "architectures": [self.architecture],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "attention_bias": self.attention_bias,
            "initializer_range": self.initializer_range,
            "num_nextn_predict_layers": self.num_nextn_predict_layers,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": _eos_json(self.eos_token_ids),
            "pad_token_id": self.pad_token_id,
            "rope_parameters": _rope_json(self.rope),
            # The same rope again in the pre-5.0 keys, for readers on older transformers (and
            # engines built on them); transformers 5 merges both into one rope_parameters.
            "rope_theta": self.rope.theta,
            "rope_scaling": _legacy_rope_scaling(self.rope),
            **_moe_json(self),
        }
        if self.torch_dtype is not None:
            out["dtype"] = self.torch_dtype
        if self.mla is not None:
            out.update(_mla_json(self))
        if self.gqa is not None:
            out.update(
                num_key_value_heads=self.gqa.num_key_value_heads,
                head_dim=self.gqa.head_dim,
                use_qk_norm=self.gqa.use_qk_norm,
                partial_rotary_factor=self.rope.partial_rotary_factor,
            )
        if self.indexer is not None:
            out.update(
                index_n_heads=self.indexer.index_n_heads,
                index_head_dim=self.indexer.index_head_dim,
                index_topk=self.indexer.index_topk,
                indexer_types=list(self.indexer.indexer_types),
                mlp_layer_types=["sparse" if m else "dense" for m in self.moe_layers],
            )
        return out


def _eos_json(ids: tuple[int, ...]) -> int | list[int] | None:
    if not ids:
        return None
    return ids[0] if len(ids) == 1 else list(ids)


def _rope_json(rope: RopeConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"rope_type": rope.kind, "rope_theta": rope.theta}
    if rope.partial_rotary_factor is not None:
        out["partial_rotary_factor"] = rope.partial_rotary_factor
    if rope.kind == "yarn":
        out.update(
            factor=rope.factor,
            original_max_position_embeddings=rope.original_max_position_embeddings,
            beta_fast=rope.beta_fast,
            beta_slow=rope.beta_slow,
            truncate=rope.truncate,
        )
        for key in ("mscale", "mscale_all_dim", "attention_factor"):
            if getattr(rope, key) is not None:
                out[key] = getattr(rope, key)
    return out


def _legacy_rope_scaling(rope: RopeConfig) -> dict[str, Any] | None:
    if rope.kind != "yarn":
        return None
    scaling = _rope_json(rope)
    del scaling["rope_theta"]
    scaling.pop("partial_rotary_factor", None)
    return scaling | {"type": "yarn"}


def _moe_json(config: ModelConfig) -> dict[str, Any]:
    moe = config.moe
    return {
        "n_routed_experts": moe.n_routed_experts,
        "num_experts_per_tok": moe.num_experts_per_tok,
        "n_shared_experts": moe.n_shared_experts,
        "moe_intermediate_size": moe.moe_intermediate_size,
        "n_group": moe.n_group,
        "topk_group": moe.topk_group,
        "norm_topk_prob": moe.norm_topk_prob,
        "routed_scaling_factor": moe.routed_scaling_factor,
        "first_k_dense_replace": config.first_k_dense_replace,
        "scoring_func": "sigmoid",
        "topk_method": "noaux_tc",
    }


def _mla_json(config: ModelConfig) -> dict[str, Any]:
    assert config.mla is not None
    mla = config.mla
    out: dict[str, Any] = {
        "num_key_value_heads": config.num_attention_heads,
        "q_lora_rank": mla.q_lora_rank,
        "kv_lora_rank": mla.kv_lora_rank,
        "qk_nope_head_dim": mla.qk_nope_head_dim,
        "qk_rope_head_dim": mla.qk_rope_head_dim,
        "v_head_dim": mla.v_head_dim,
        "rope_interleave": config.rope.interleaved,
    }
    if config.architecture == GLM_MOE_DSA:
        out["indexer_rope_interleave"] = True
    return out
