"""Parse a checkpoint's config.json into a ``ModelConfig`` (once, with every check in one place).

A key missing from config.json takes transformers' default for that architecture
(``config_defaults.DEFAULTS``), so ember and the transformers oracle agree on what a short config
means. A present key with a wrong type or an unsupported value is a ``ConfigError`` naming the
file, the key, what was found and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ember.errors import CheckpointError, ConfigError
from ember.models.config import (
    ARCHITECTURES,
    DEEPSEEK_V3,
    GLM4_MOE,
    GLM_MOE_DSA,
    GQAConfig,
    IndexerConfig,
    MLAConfig,
    ModelConfig,
    MoEConfig,
    RopeConfig,
)
from ember.models.config_defaults import DEFAULTS

_MODEL_TYPES = MappingProxyType(
    {
        "deepseek_v3": DEEPSEEK_V3,
        "kimi_k2": DEEPSEEK_V3,
        "glm4_moe": GLM4_MOE,
        "glm_moe_dsa": GLM_MOE_DSA,
    }
)
# Multimodal wrappers whose text model is one of ours (Kimi K2.5: weights under "language_model.").
_WRAPPER_PREFIX = "language_model."


def load_config(path: str | Path) -> ModelConfig:
    """Read ``path`` (a checkpoint directory or its config.json) into a ``ModelConfig``."""
    file = Path(path)
    if not file.exists():
        raise CheckpointError(f"{file}: does not exist (expected a checkpoint directory)")
    if file.is_dir():
        file = file / "config.json"
    if not file.is_file():
        raise CheckpointError(f"{file}: missing (a checkpoint directory needs a config.json)")
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(str(file), None, str(exc), "a JSON object") from None
    if not isinstance(raw, dict):
        raise ConfigError(str(file), None, type(raw).__name__, "a JSON object")
    return parse_config(raw, source=str(file))


def parse_config(raw: Mapping[str, Any], source: str = "<dict>") -> ModelConfig:
    """Validate a config.json mapping (transformers' keys) and build the typed config."""
    if not isinstance(raw, Mapping):
        raise ConfigError(source, None, type(raw).__name__, "a JSON object")
    text, key_prefix, weight_prefix = _text_config(raw, source)
    architecture = _architecture(text, source, key_prefix)
    r = _Reader(text, source, key_prefix, DEFAULTS[architecture])
    if r.str("hidden_act") != "silu":
        raise r.error("hidden_act", "silu")
    num_layers = r.int("num_hidden_layers")
    heads = r.int("num_attention_heads")
    mla = _mla(r, architecture) if architecture != GLM4_MOE else None
    gqa = _gqa(r, heads) if architecture == GLM4_MOE else None
    quant = text.get("quantization_config", raw.get("quantization_config"))
    return ModelConfig(
        architecture=architecture,
        model_type=str(text.get("model_type") or _default_model_type(architecture)),
        vocab_size=r.int("vocab_size"),
        hidden_size=r.int("hidden_size"),
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        intermediate_size=r.int("intermediate_size"),
        rms_norm_eps=r.float("rms_norm_eps"),
        max_position_embeddings=r.int("max_position_embeddings"),
        tie_word_embeddings=r.bool("tie_word_embeddings"),
        attention_bias=r.bool("attention_bias"),
        rope=_rope(r, architecture, mla, gqa),
        moe=_moe(r),
        moe_layers=_moe_layers(r, architecture, num_layers),
        mla=mla,
        gqa=gqa,
        indexer=_indexer(r, num_layers, mla) if architecture == GLM_MOE_DSA else None,
        num_nextn_predict_layers=r.int("num_nextn_predict_layers", minimum=0),
        initializer_range=r.float("initializer_range"),
        bos_token_id=r.opt_int("bos_token_id"),
        eos_token_ids=_eos(r),
        pad_token_id=r.opt_int("pad_token_id"),
        torch_dtype=_dtype_name(text),
        quantization_method=_quant_method(quant, r),
        weight_prefix=weight_prefix,
        source=source,
    )


class _Reader:
    """Typed access to one config mapping, with architecture defaults and precise errors."""

    def __init__(
        self, raw: Mapping[str, Any], source: str, prefix: str, defaults: Mapping[str, Any]
    ) -> None:
        self.raw, self.source, self.prefix, self.defaults = raw, source, prefix, defaults

    def error(self, key: str, expected: str, found: Any = ...) -> ConfigError:
        value = self.get(key) if found is ... else found
        return ConfigError(self.source, self.prefix + key, value, expected)

    def get(self, key: str) -> Any:
        if key in self.raw:
            return self.raw[key]
        return self.defaults.get(key)

    def int(self, key: str, minimum: int = 1) -> int:
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(key, f"an integer >= {minimum}")
        return value

    def opt_int(self, key: str, minimum: int = 0) -> int | None:
        return None if self.get(key) is None else self.int(key, minimum)

    def float(self, key: str, *, positive: bool = True) -> float:
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, "a number")
        if positive and not value > 0:
            raise self.error(key, "a positive number")
        return float(value)

    def bool(self, key: str) -> bool:
        value = self.get(key)
        if not isinstance(value, bool):
            raise self.error(key, "true or false")
        return value

    def str(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str):
            raise self.error(key, "a string")
        return value


def _text_config(raw: Mapping[str, Any], source: str) -> tuple[Mapping[str, Any], str, str]:
    archs = raw.get("architectures")
    ours = isinstance(archs, list) and bool(archs) and archs[0] in ARCHITECTURES
    if ours or "text_config" not in raw:
        return raw, "", ""
    text = raw["text_config"]
    if not isinstance(text, Mapping):
        raise ConfigError(source, "text_config", text, "a JSON object (the text model's config)")
    return text, "text_config.", _WRAPPER_PREFIX


def _architecture(raw: Mapping[str, Any], source: str, prefix: str) -> str:
    archs = raw.get("architectures")
    if archs is not None:
        if not isinstance(archs, list) or not archs or archs[0] not in ARCHITECTURES:
            expected = "a list whose first entry is one of " + ", ".join(ARCHITECTURES)
            raise ConfigError(source, prefix + "architectures", archs, expected)
        return str(archs[0])
    model_type = raw.get("model_type")
    if model_type not in _MODEL_TYPES:
        expected = "architectures, or a model_type in " + ", ".join(sorted(_MODEL_TYPES))
        raise ConfigError(source, prefix + "model_type", model_type, expected)
    return _MODEL_TYPES[model_type]


def _default_model_type(architecture: str) -> str:
    return next(t for t, a in _MODEL_TYPES.items() if a == architecture)


def _mla(r: _Reader, architecture: str) -> MLAConfig:
    q_lora = r.get("q_lora_rank")
    if q_lora is None and architecture == GLM_MOE_DSA:
        raise r.error("q_lora_rank", "an integer >= 1 (the DSA indexer reads the query latent)")
    rope_dim = r.int("qk_rope_head_dim")
    if rope_dim % 2:
        raise r.error("qk_rope_head_dim", "an even integer")
    return MLAConfig(
        q_lora_rank=None if q_lora is None else r.int("q_lora_rank"),
        kv_lora_rank=r.int("kv_lora_rank"),
        qk_nope_head_dim=r.int("qk_nope_head_dim"),
        qk_rope_head_dim=rope_dim,
        v_head_dim=r.int("v_head_dim"),
    )


def _gqa(r: _Reader, heads: int) -> GQAConfig:
    kv_heads = r.int("num_key_value_heads")
    if heads % kv_heads:
        raise r.error("num_key_value_heads", f"a divisor of num_attention_heads ({heads})")
    head_dim = r.get("head_dim")
    if head_dim is None:
        head_dim = r.int("hidden_size") // heads
    else:
        head_dim = r.int("head_dim")
    return GQAConfig(
        num_key_value_heads=kv_heads, head_dim=head_dim, use_qk_norm=r.bool("use_qk_norm")
    )


def _rope(
    r: _Reader, architecture: str, mla: MLAConfig | None, gqa: GQAConfig | None
) -> RopeConfig:
    key = "rope_parameters" if r.raw.get("rope_parameters") is not None else "rope_scaling"
    params = r.raw.get(key) or {}
    if not isinstance(params, Mapping) or any(isinstance(v, Mapping) for v in params.values()):
        raise r.error(key, "one JSON object of rope parameters (per-layer-type rope unsupported)")
    p = _Reader(params, r.source, r.prefix + key + ".", {})
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ("default", "yarn"):
        raise p.error("rope_type", '"default" or "yarn"', kind)
    theta_reader = p if "rope_theta" in params else r
    theta = theta_reader.float("rope_theta")
    partial_key = "partial_rotary_factor"
    partial_reader = p if partial_key in params else r
    partial = partial_reader.get(partial_key)
    if gqa is not None:
        partial = partial_reader.float(partial_key)
        dim = int(gqa.head_dim * partial)
        if dim < 2 or dim % 2 or partial > 1:
            raise partial_reader.error(partial_key, "a factor <= 1 giving an even rotary dim")
    else:
        assert mla is not None
        if partial not in (None, 1, 1.0):
            raise partial_reader.error(partial_key, "absent or 1.0 (MLA rotates qk_rope_head_dim)")
        partial, dim = None, mla.qk_rope_head_dim
    interleaved = False if gqa is not None else _rope_interleave(r, architecture)
    if kind == "default":
        return RopeConfig(theta, dim, interleaved, partial_rotary_factor=partial)
    max_pos = r.int("max_position_embeddings")
    original = params.get("original_max_position_embeddings") or r.raw.get(
        "original_max_position_embeddings", max_pos
    )
    if isinstance(original, bool) or not isinstance(original, int) or original < 1:
        raise p.error("original_max_position_embeddings", "an integer >= 1", original)
    factor = p.float("factor") if params.get("factor") is not None else max_pos / original
    opt = {k: p.float(k) if params.get(k) is not None else None for k in _OPTIONAL_YARN}
    truncate = params.get("truncate", True)
    if not isinstance(truncate, bool):
        raise p.error("truncate", "true or false", truncate)
    return RopeConfig(
        theta,
        dim,
        interleaved,
        kind="yarn",
        factor=factor,
        original_max_position_embeddings=original,
        # transformers reads these with `or`: a 0 or null means the default.
        beta_fast=float(params.get("beta_fast") or 32),
        beta_slow=float(params.get("beta_slow") or 1),
        mscale=opt["mscale"],
        mscale_all_dim=opt["mscale_all_dim"],
        attention_factor=opt["attention_factor"],
        truncate=truncate,
        partial_rotary_factor=partial,
    )


_OPTIONAL_YARN = ("mscale", "mscale_all_dim", "attention_factor")


def _rope_interleave(r: _Reader, architecture: str) -> bool:
    if architecture == DEEPSEEK_V3:
        return r.bool("rope_interleave") if "rope_interleave" in r.raw else True
    # GlmMoeDsa always rotates interleaved pairs (transformers ignores the flag); refuse a config
    # that asks otherwise rather than silently running a different model.
    for key in ("rope_interleave", "indexer_rope_interleave"):
        if r.raw.get(key, True) is not True:
            raise r.error(key, "true (GlmMoeDsa rotates interleaved pairs)")
    return True


def _moe(r: _Reader) -> MoEConfig:
    for key, expected in (("scoring_func", "sigmoid"), ("topk_method", "noaux_tc")):
        if r.raw.get(key, expected) != expected:
            raise r.error(key, f'"{expected}" (the only router ember implements)')
    if r.raw.get("moe_layer_freq", 1) != 1:
        raise r.error("moe_layer_freq", "1 (every layer past first_k_dense_replace is MoE)")
    experts = r.int("n_routed_experts")
    n_group = r.int("n_group")
    if experts % n_group or experts // n_group < 2:
        raise r.error(
            "n_group", f"a divisor of n_routed_experts ({experts}) leaving >= 2 per group"
        )
    topk_group = r.int("topk_group")
    if topk_group > n_group:
        raise r.error("topk_group", f"at most n_group ({n_group})")
    top_k = r.int("num_experts_per_tok")
    if top_k > topk_group * (experts // n_group):
        raise r.error("num_experts_per_tok", "at most topk_group * experts per group")
    return MoEConfig(
        n_routed_experts=experts,
        num_experts_per_tok=top_k,
        n_shared_experts=r.int("n_shared_experts", minimum=0),
        moe_intermediate_size=r.int("moe_intermediate_size"),
        n_group=n_group,
        topk_group=topk_group,
        norm_topk_prob=r.bool("norm_topk_prob"),
        routed_scaling_factor=r.float("routed_scaling_factor"),
    )


def _moe_layers(r: _Reader, architecture: str, num_layers: int) -> tuple[bool, ...]:
    kinds = r.raw.get("mlp_layer_types") if architecture == GLM_MOE_DSA else None
    if kinds is None:
        first_dense = r.int("first_k_dense_replace", minimum=0)
        return tuple(i >= first_dense for i in range(num_layers))
    if not isinstance(kinds, list) or len(kinds) != num_layers:
        raise r.error("mlp_layer_types", f'a list of {num_layers} "dense" / "sparse" entries')
    if any(kind not in ("dense", "sparse") for kind in kinds):
        raise r.error("mlp_layer_types", 'entries "dense" or "sparse"')
    return tuple(kind == "sparse" for kind in kinds)


def _indexer(r: _Reader, num_layers: int, mla: MLAConfig | None) -> IndexerConfig:
    assert mla is not None
    head_dim = r.int("index_head_dim")
    if head_dim < mla.qk_rope_head_dim:
        raise r.error("index_head_dim", f"at least qk_rope_head_dim ({mla.qk_rope_head_dim})")
    types = r.raw.get("indexer_types")
    if types is None:
        types = _derived_indexer_types(r, num_layers)
    if not isinstance(types, list) or len(types) != num_layers:
        raise r.error("indexer_types", f'a list of {num_layers} "full" / "shared" entries')
    if any(t not in ("full", "shared") for t in types) or types[0] != "full":
        raise r.error("indexer_types", 'entries "full" or "shared", the first one "full"')
    return IndexerConfig(
        index_n_heads=r.int("index_n_heads"),
        index_head_dim=head_dim,
        index_topk=r.int("index_topk"),
        indexer_types=tuple(types),
    )


def _derived_indexer_types(r: _Reader, num_layers: int) -> list[str]:
    """transformers' rule: a F/S pattern if given, else every ``freq``-th layer past ``offset``."""
    pattern = r.raw.get("index_topk_pattern")
    if isinstance(pattern, str):
        if set(pattern) - {"F", "S"}:
            raise r.error("index_topk_pattern", 'a string of "F" and "S"')
        return ["full" if c == "F" else "shared" for c in pattern]
    if pattern is not None:
        return list(pattern)
    freq = max(r.int("index_topk_freq"), 1)
    offset = r.int("index_skip_topk_offset", minimum=0)
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(num_layers)]


def _eos(r: _Reader) -> tuple[int, ...]:
    value = r.get("eos_token_id")
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in values):
        raise r.error("eos_token_id", "a token id or a list of token ids")
    return tuple(values)


def _dtype_name(raw: Mapping[str, Any]) -> str | None:
    value = raw.get("dtype", raw.get("torch_dtype"))
    return value if isinstance(value, str) else None


def _quant_method(quant: Any, r: _Reader) -> str | None:
    if quant is None:
        return None
    if not isinstance(quant, Mapping) or not isinstance(quant.get("quant_method"), str):
        raise r.error("quantization_config", "an object with a quant_method string", quant)
    return str(quant["quant_method"])
