"""What a model costs: parameters, active parameters per token, weight bytes, KV bytes per token.

Parameter and weight figures come from the model's own modules, built on the meta device (no
memory): the top level once and one decoder layer per distinct layer kind (dense or MoE, own or
shared indexer), repeated as the config lays them out, so a trillion-parameter config is counted
in well under a second and exactly as ``build_model`` would build it (a test checks the two
agree). KV bytes come from the config; the engine sizes its KV cache with
``kv_bytes_per_token`` / ``kv_capacity_tokens``.

Published checkpoints also store multi-token-prediction layers, which ember skips: the
``checkpoint_*`` figures add them (each one MoE decoder layer, ``eh_proj`` (hidden x 2 hidden) and
three norms, as in DeepSeek-V3 and GLM), the others count only what ember loads.

Weight formats (bytes for one ``nn.Linear`` weight of ``out x in``):

- ``bf16``: ``2 * out * in``.
- ``fp8``: ``out * in`` + one float32 scale per 128x128 block (DeepSeek / GLM FP8 checkpoints).
- ``int4``: ``out * in / 2`` + one ``scale_bytes`` scale (+ zero point) per ``group_size``
  inputs of each output row (Kimi K2's native scheme: group 32, BF16 scales, symmetric).

Embeddings, ``lm_head``, norms, biases and routers stay BF16 in every scheme (the routers'
``e_score_correction_bias`` is float32), as in the published FP8 and INT4 checkpoints.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

import torch
from torch import nn

from ember.models.config import ModelConfig
from ember.models.layers.moe import TopkRouter
from ember.models.layers.norm import RMSNorm

Format = Literal["bf16", "fp8", "int4"]
CATEGORIES = (
    "embedding",
    "lm_head",
    "attention",
    "indexer",
    "dense_mlp",
    "shared_experts",
    "routed_experts",
    "router",
    "norm",
    "mtp_projection",
)


@dataclass(frozen=True, slots=True)
class Int4Format:
    group_size: int = 32
    scale_bytes: int = 2  # BF16 scales
    zero_point: bool = False  # symmetric (Kimi); asymmetric adds one zero per group


@dataclass(frozen=True, slots=True)
class WeightScheme:
    """How each kind of linear weight is stored."""

    name: str
    routed_experts: Format
    other_linear: Format  # attention, indexer, dense MLPs, shared experts (not lm_head)
    int4: Int4Format = Int4Format()
    fp8_block: int = 128


def standard_schemes(int4: Int4Format = Int4Format()) -> tuple[WeightScheme, ...]:
    """The schemes ``ember models inspect`` reports."""
    return (
        WeightScheme("bf16", "bf16", "bf16"),
        WeightScheme("fp8", "fp8", "fp8"),
        WeightScheme("int4-experts", "int4", "fp8", int4),  # the seed's "INT4 from FP8"
        WeightScheme("int4-experts-bf16-rest", "int4", "bf16", int4),  # Kimi K2.x native
        WeightScheme("int4-all-linear", "int4", "int4", int4),
    )


@dataclass(frozen=True, slots=True)
class _Tensor:
    category: str
    shape: tuple[int, ...]
    is_linear_weight: bool
    is_buffer: bool  # stored in checkpoints but not a parameter (the routers' score correction)


@dataclass(frozen=True, slots=True)
class ParameterCounts:
    total: int
    active_per_token: int  # everything but the routed experts, plus top-k of them per MoE layer
    by_category: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class KVBytes:
    """Cache bytes one token occupies, summed over layers."""

    attention: int  # GQA: K and V; MLA: latent + rotary key
    indexer: int  # DSA indexer keys (full-indexer layers only)

    @property
    def total(self) -> int:
        return self.attention + self.indexer


@dataclass(frozen=True, slots=True)
class Inspection:
    """Everything ``ember models inspect`` prints, for one config."""

    architecture: str
    parameters: ParameterCounts  # the model ember loads (no MTP layers)
    weight_bytes: dict[str, int]  # scheme name -> bytes of the model ember loads
    weight_bits_per_parameter: dict[str, float]
    mtp_parameters: int  # what the checkpoint's MTP layers add
    checkpoint_weight_bytes: dict[str, int]  # scheme name -> bytes including MTP layers
    kv_bytes_per_token: dict[str, KVBytes]
    int4: Int4Format

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        for dtype, kv in self.kv_bytes_per_token.items():
            out["kv_bytes_per_token"][dtype]["total"] = kv.total
        return out


def inspect_config(config: ModelConfig, int4: Int4Format = Int4Format()) -> Inspection:
    tensors = model_tensors(config)
    checkpoint = tensors + mtp_tensors(config)
    counts = count_parameters(config, tensors)
    schemes = standard_schemes(int4)
    weights = {s.name: weight_bytes(tensors, s) for s in schemes}
    return Inspection(
        architecture=config.architecture,
        parameters=counts,
        weight_bytes=weights,
        weight_bits_per_parameter={k: 8 * v / counts.total for k, v in weights.items()},
        mtp_parameters=sum(
            math.prod(t.shape) for t in checkpoint[len(tensors) :] if not t.is_buffer
        ),
        checkpoint_weight_bytes={s.name: weight_bytes(checkpoint, s) for s in schemes},
        kv_bytes_per_token={d: kv_bytes_per_token(config, d) for d in ("bf16", "fp8")},
        int4=int4,
    )


def model_tensors(config: ModelConfig) -> list[_Tensor]:
    """Every parameter and persistent buffer of the model ember builds, classified."""
    from ember.models.arch import REGISTRY  # deferred: accounting users may only need KV bytes
    from ember.models.arch.base import DecoderLayer

    cls = REGISTRY[config.architecture]
    indexer = config.indexer
    shell = replace(
        config,
        num_hidden_layers=0,
        moe_layers=(),
        indexer=None if indexer is None else replace(indexer, indexer_types=()),
    )
    with torch.device("meta"):
        out = _classified(cls(shell), "")
        kinds: dict[tuple[bool, str | None], list[_Tensor]] = {}
        for i, is_moe in enumerate(config.moe_layers):
            kind = (is_moe, None if indexer is None else indexer.indexer_types[i])
            if kind not in kinds:
                layer = DecoderLayer(config, i, cls.make_attention(config, i))
                kinds[kind] = _classified(layer, f"model.layers.{i}")
            out.extend(kinds[kind])
    return out


def mtp_tensors(config: ModelConfig) -> list[_Tensor]:
    """What the checkpoint's ``num_nextn_predict_layers`` MTP layers store (ember skips them)."""
    from ember.models.arch import REGISTRY
    from ember.models.arch.base import DecoderLayer

    if not config.num_nextn_predict_layers:
        return []
    indexer = config.indexer
    one_moe_layer = replace(
        config,
        num_hidden_layers=1,
        moe_layers=(True,),
        indexer=None if indexer is None else replace(indexer, indexer_types=("full",)),
    )
    with torch.device("meta"):
        attention = REGISTRY[config.architecture].make_attention(one_moe_layer, 0)
        layer = _classified(DecoderLayer(one_moe_layer, 0, attention), "model.layers.0")
    hidden = config.hidden_size
    extra = [
        _Tensor("mtp_projection", (hidden, 2 * hidden), True, False),  # eh_proj
        *(_Tensor("norm", (hidden,), False, False) for _ in range(3)),  # enorm, hnorm, head norm
    ]
    return (layer + extra) * config.num_nextn_predict_layers


def _classified(module: nn.Module, prefix: str) -> list[_Tensor]:
    """The distinct persistent tensors under ``module`` (a tied lm_head counts once)."""
    seen: set[int] = set()
    out = []
    for path, child in module.named_modules(prefix=prefix):
        tensors = [*child.named_parameters(recurse=False), *child.named_buffers(recurse=False)]
        for name, tensor in tensors:
            if id(tensor) in seen or name in child._non_persistent_buffers_set:
                continue
            seen.add(id(tensor))
            out.append(
                _Tensor(
                    _category(path, child),
                    tuple(tensor.shape),
                    isinstance(child, nn.Linear) and name == "weight",
                    name in child._buffers,
                )
            )
    return out


def count_parameters(config: ModelConfig, tensors: list[_Tensor] | None = None) -> ParameterCounts:
    tensors = model_tensors(config) if tensors is None else tensors
    by_category = dict.fromkeys(CATEGORIES, 0)
    for tensor in tensors:
        if not tensor.is_buffer:
            by_category[tensor.category] += math.prod(tensor.shape)
    total = sum(by_category.values())
    moe = config.moe
    routed = by_category["routed_experts"]
    active_routed = routed * moe.num_experts_per_tok // moe.n_routed_experts
    return ParameterCounts(total, total - routed + active_routed, by_category)


def weight_bytes(tensors: list[_Tensor], scheme: WeightScheme) -> int:
    total = 0
    for tensor in tensors:
        if tensor.is_buffer:  # float32 in every published checkpoint
            total += 4 * math.prod(tensor.shape)
        elif tensor.is_linear_weight and tensor.category != "lm_head":
            fmt = (
                scheme.routed_experts
                if tensor.category == "routed_experts"
                else scheme.other_linear
            )
            total += linear_weight_bytes(tensor.shape[0], tensor.shape[1], fmt, scheme)
        else:
            total += 2 * math.prod(tensor.shape)
    return total


def linear_weight_bytes(
    out_features: int, in_features: int, fmt: Format, scheme: WeightScheme
) -> int:
    if fmt == "bf16":
        return 2 * out_features * in_features
    if fmt == "fp8":
        blocks = math.ceil(out_features / scheme.fp8_block) * math.ceil(
            in_features / scheme.fp8_block
        )
        return out_features * in_features + 4 * blocks
    int4 = scheme.int4
    groups = out_features * math.ceil(in_features / int4.group_size)
    per_group = int4.scale_bytes * (2 if int4.zero_point else 1)
    return math.ceil(out_features * in_features / 2) + groups * per_group


def kv_bytes_per_token(config: ModelConfig, dtype: Literal["bf16", "fp8"]) -> KVBytes:
    """Bytes per cached token. FP8 uses one scale per tensor, so no per-token scale bytes."""
    size = {"bf16": 2, "fp8": 1}[dtype]
    layers = config.num_hidden_layers
    if config.mla is not None:
        per_layer = config.mla.kv_lora_rank + config.mla.qk_rope_head_dim
    else:
        assert config.gqa is not None
        per_layer = 2 * config.gqa.num_key_value_heads * config.gqa.head_dim
    indexer = 0
    if config.indexer is not None:
        indexer = config.indexer.index_head_dim * config.indexer.num_full_layers * size
    return KVBytes(per_layer * layers * size, indexer)


def kv_capacity_tokens(
    config: ModelConfig, budget_bytes: int, dtype: Literal["bf16", "fp8"]
) -> int:
    """How many tokens of KV cache fit in ``budget_bytes``."""
    return max(budget_bytes, 0) // kv_bytes_per_token(config, dtype).total


def _category(path: str, module: nn.Module) -> str:
    if isinstance(module, RMSNorm | nn.LayerNorm) and ".indexer." not in path:
        return "norm"
    if isinstance(module, TopkRouter):
        return "router"
    if path == "model.embed_tokens":
        return "embedding"
    if path == "lm_head":
        return "lm_head"
    for marker, category in (
        (".mlp.experts.", "routed_experts"),
        (".mlp.shared_experts.", "shared_experts"),
        (".self_attn.indexer.", "indexer"),
        (".self_attn.", "attention"),
        (".mlp.", "dense_mlp"),
    ):
        if marker in path:
            return category
    raise ValueError(f"unclassified module {path!r}")
