"""config.json -> ModelConfig: defaults, wrappers, legacy keys; errors name the file and key."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ember.errors import CheckpointError, ConfigError
from ember.models.catalog import reference_configs
from ember.models.config import DEEPSEEK_V3, GLM_MOE_DSA
from ember.models.config_parse import load_config, parse_config
from tests.models import tiny


@pytest.mark.parametrize("arch", sorted(tiny.ALL))
def test_round_trip_through_config_json(arch: str) -> None:
    config = parse_config(tiny.ALL[arch]())
    assert parse_config(config.to_hf_dict()) == config


@pytest.mark.parametrize("name", sorted(reference_configs()))
def test_full_size_configs_parse_and_round_trip(name: str) -> None:
    config = load_config(reference_configs()[name])
    # to_hf_dict writes the text model unwrapped and without the quantization block.
    expected = dataclasses.replace(config, weight_prefix="", quantization_method=None)
    assert parse_config(config.to_hf_dict()) == expected


def test_kimi_k25_wrapper_reads_the_text_config() -> None:
    config = load_config(reference_configs()["kimi-k2.5"])
    assert config.architecture == DEEPSEEK_V3
    assert config.model_type == "kimi_k2"
    assert config.weight_prefix == "language_model."
    assert config.quantization_method == "compressed-tensors"
    assert config.rope.kind == "yarn" and config.rope.factor == 64.0
    assert config.eos_token_ids == (163586,)


def test_kimi_k2_legacy_rope_scaling_keys() -> None:
    config = load_config(reference_configs()["kimi-k2"])
    assert config.rope.kind == "yarn"
    assert config.rope.theta == 50000.0
    assert config.rope.original_max_position_embeddings == 4096
    assert (config.rope.beta_fast, config.rope.mscale_all_dim) == (1.0, 1.0)
    assert config.rope.interleaved and config.rope.dim == 64
    assert config.first_k_dense_replace == 1 and config.num_moe_layers == 60


def test_glm52_index_share_schedule_is_derived_like_transformers() -> None:
    config = load_config(reference_configs()["glm-5.2"])
    assert config.architecture == GLM_MOE_DSA
    assert config.indexer is not None
    full = [i for i, kind in enumerate(config.indexer.indexer_types) if kind == "full"]
    assert full[:6] == [0, 1, 2, 6, 10, 14]
    assert len(full) == 21
    assert config.rope.theta == 8_000_000 and config.rope.interleaved


def test_missing_keys_take_transformers_defaults() -> None:
    raw = {"architectures": ["Glm4MoeForCausalLM"], "num_hidden_layers": 2, "head_dim": 128}
    config = parse_config(raw)
    assert config.gqa is not None
    assert config.hidden_size == 4096 and config.num_attention_heads == 96
    assert config.rope.dim == 64
    assert config.rope.partial_rotary_factor == 0.5
    assert config.moe.n_routed_experts == 128
    assert config.moe_layers == (False, True)


def test_model_type_alone_selects_the_architecture() -> None:
    assert parse_config({"model_type": "kimi_k2"}).architecture == DEEPSEEK_V3


@pytest.mark.parametrize(
    ("overrides", "key", "expected"),
    [
        ({"architectures": ["LlamaForCausalLM"]}, "architectures", "DeepseekV3ForCausalLM"),
        ({"hidden_size": "256"}, "hidden_size", "an integer >= 1"),
        ({"num_hidden_layers": 0}, "num_hidden_layers", "an integer >= 1"),
        ({"rms_norm_eps": -1}, "rms_norm_eps", "a positive number"),
        ({"n_group": 3}, "n_group", "a divisor of n_routed_experts"),
        ({"topk_group": 3}, "topk_group", "at most n_group"),
        ({"num_experts_per_tok": 5}, "num_experts_per_tok", "at most topk_group"),
        ({"scoring_func": "softmax"}, "scoring_func", '"sigmoid"'),
        ({"hidden_act": "gelu"}, "hidden_act", "silu"),
        ({"qk_rope_head_dim": 7}, "qk_rope_head_dim", "an even integer"),
        ({"rope_parameters": {"rope_type": "dynamic"}}, "rope_parameters.rope_type", "yarn"),
        ({"eos_token_id": ["x"]}, "eos_token_id", "a token id"),
        ({"norm_topk_prob": "yes"}, "norm_topk_prob", "true or false"),
    ],
)
def test_bad_fields_name_the_file_and_key(overrides: dict, key: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(tiny.kimi(**overrides), source="ckpt/config.json")
    assert info.value.file == "ckpt/config.json"
    assert info.value.key == key
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"indexer_types": ["shared", "full", "full"]}, "indexer_types"),
        ({"indexer_types": ["full"]}, "indexer_types"),
        ({"index_head_dim": 4}, "index_head_dim"),
        ({"mlp_layer_types": ["dense", "moe", "sparse"]}, "mlp_layer_types"),
        ({"rope_interleave": False}, "rope_interleave"),
        ({"q_lora_rank": None}, "q_lora_rank"),
    ],
)
def test_bad_dsa_fields(overrides: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(tiny.glmdsa(**overrides))
    assert info.value.key == key


def test_wrapper_errors_name_the_nested_key() -> None:
    raw = {"architectures": ["KimiK25ForConditionalGeneration"], "text_config": tiny.kimi()}
    raw["text_config"]["kv_lora_rank"] = -1
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert info.value.key == "text_config.kv_lora_rank"


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="config.json: missing"):
        load_config(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="config.json"):
        load_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ConfigError, match="a JSON object"):
        load_config(tmp_path)
