"""Accounting reproduces the public figures for the full-size configs and counts real modules."""

from __future__ import annotations

import dataclasses

import pytest

from ember.models.accounting import (
    Int4Format,
    WeightScheme,
    count_parameters,
    inspect_config,
    kv_bytes_per_token,
    kv_capacity_tokens,
    linear_weight_bytes,
)
from ember.models.arch import build_model
from ember.models.catalog import reference_configs
from ember.models.config import ModelConfig
from ember.models.config_parse import load_config, parse_config
from tests.models import tiny

GIB = 2**30


def _full(name: str) -> ModelConfig:
    return load_config(reference_configs()[name])


@pytest.mark.parametrize(
    ("name", "bf16", "fp8"),
    [
        ("kimi-k2", 70_272, 35_136),  # 61 layers x (512 + 64) latent
        ("kimi-k2.5", 70_272, 35_136),
        ("glm-4.7", 376_832, 188_416),  # 92 layers x K and V of 8 x 128
        ("glm-5.2", 89_856, 44_928),  # 78 layers x (512 + 64), plus indexer keys below
    ],
)
def test_kv_bytes_per_token_match_the_public_figures(name: str, bf16: int, fp8: int) -> None:
    config = _full(name)
    assert kv_bytes_per_token(config, "bf16").attention == bf16
    assert kv_bytes_per_token(config, "fp8").attention == fp8


def test_glm52_indexer_keys_are_counted_on_full_layers_only() -> None:
    kv = kv_bytes_per_token(_full("glm-5.2"), "bf16")
    assert kv.indexer == 21 * 128 * 2  # 21 full-indexer layers of 78
    assert kv.total == 89_856 + 5_376


def test_fp8_kv_doubles_capacity() -> None:
    config = _full("kimi-k2")
    budget = 61_600_000_000
    ratio = kv_capacity_tokens(config, budget, "fp8") / kv_capacity_tokens(config, budget, "bf16")
    assert ratio == pytest.approx(2.0, abs=1e-4)


def test_glm52_weights_reproduce_the_seed_705_and_421() -> None:
    """705 GB (FP8) -> 421 GB (INT4 routed experts): both in GiB of the published checkpoint,
    which includes GLM-5.2's MTP layer. FP8: block-128 scales, embeddings/norms/routers BF16.
    INT4: routed experts at group 32 with BF16 scales, everything else BF16 (Kimi's scheme)."""
    report = inspect_config(_full("glm-5.2"))
    fp8 = report.checkpoint_weight_bytes["fp8"] / GIB
    int4 = report.checkpoint_weight_bytes["int4-experts-bf16-rest"] / GIB
    assert fp8 == pytest.approx(705, rel=0.01)
    assert int4 == pytest.approx(421, rel=0.01)
    assert 1 - int4 / fp8 == pytest.approx(0.403, abs=0.005)
    # Total parameters: the 744-753 B reported for GLM-5, with and without its MTP layer.
    assert report.parameters.total / 1e9 == pytest.approx(743.4, abs=0.1)
    assert (report.parameters.total + report.mtp_parameters) / 1e9 == pytest.approx(753.3, abs=0.1)


def test_kimi_k25_int4_checkpoint_size() -> None:
    """K2.5's native INT4 (experts g32, BF16 rest) is published at 554.27 GiB (text + vision)."""
    report = inspect_config(_full("kimi-k2.5"))
    assert report.checkpoint_weight_bytes["int4-experts-bf16-rest"] / GIB == pytest.approx(
        554.27, rel=0.01
    )
    assert report.parameters.total / 1e12 == pytest.approx(1.03, abs=0.01)
    assert report.parameters.active_per_token / 1e9 == pytest.approx(32.9, abs=0.1)


def test_linear_formats() -> None:
    scheme = WeightScheme("x", "int4", "fp8", Int4Format(32, 2))
    assert linear_weight_bytes(2048, 7168, "int4", scheme) * 8 / (2048 * 7168) == 4.5
    g128 = dataclasses.replace(scheme, int4=Int4Format(128, 2))
    assert linear_weight_bytes(2048, 7168, "int4", g128) * 8 / (2048 * 7168) == 4.125
    fp8_bits = linear_weight_bytes(2048, 7168, "fp8", scheme) * 8 / (2048 * 7168)
    assert fp8_bits == pytest.approx(8.002, abs=1e-3)
    assert linear_weight_bytes(100, 200, "bf16", scheme) == 40_000


@pytest.mark.parametrize(
    ("arch", "overrides", "expected"),
    [
        # cpu-anchors.md's tiny checkpoints, counted by transformers there.
        ("kimi", {"q_lora_rank": 128, "qk_nope_head_dim": 32, "v_head_dim": 32}, 10_320_896),
        ("glm4", {"head_dim": 64}, 10_601_216),
        ("glmdsa", {"q_lora_rank": 128, "qk_nope_head_dim": 32, "v_head_dim": 32}, 10_522_112),
    ],
)
def test_cpu_anchor_tiny_models_have_the_published_parameter_counts(
    arch: str, overrides: dict, expected: int
) -> None:
    base = {
        "vocab_size": 8192,
        "hidden_size": 256,
        "intermediate_size": 768,
        "moe_intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "n_routed_experts": 16,
        "num_experts_per_tok": 4,
        "n_group": 1,
        "kv_lora_rank": 64,
        "qk_rope_head_dim": 16,
        "index_n_heads": 4,
        "index_head_dim": 64,
        "index_topk": 2048,
        "indexer_types": ["full"] * 4,
    }
    config = parse_config(tiny.ALL[arch](**base, **overrides))
    assert count_parameters(config).total == expected
    assert sum(p.numel() for p in build_model(config).parameters()) == expected


def test_layer_kind_accounting_equals_the_whole_meta_model() -> None:
    """A cut-down GLM-5.2 (10 layers: dense and MoE, own and shared indexers) built on meta."""
    raw = _full("glm-5.2").to_hf_dict()
    raw.update(
        num_hidden_layers=10,
        indexer_types=raw["indexer_types"][:10],
        mlp_layer_types=raw["mlp_layer_types"][:10],
    )
    config = parse_config(raw)
    model = build_model(config, device="meta")
    assert {t.device.type for t in model.state_dict().values()} == {"meta"}
    parameters = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() for b in model.buffers())  # the routers' float32 score corrections
    report = inspect_config(config)
    assert report.parameters.total == parameters
    assert report.weight_bytes["bf16"] == 2 * parameters + 4 * buffers
