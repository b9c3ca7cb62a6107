"""KV bytes per token and capacity from a byte budget (serving.md §2, §10.1-2)."""

from __future__ import annotations

import pytest

from ember.errors import ConfigError
from ember.models.kv.spec import (
    KVSpec,
    kv_budget_from_fraction,
    kv_capacity,
    kv_layout_for,
    parse_kv_dtype,
)

KIMI_K2 = KVSpec("mla", 61, "bf16", kv_lora_rank=512, qk_rope_head_dim=64)
GLM_45 = KVSpec("gqa", 92, "bf16", num_kv_heads=8, head_dim=128, v_head_dim=128)
GLM_52 = KVSpec("mla", 78, "bf16", kv_lora_rank=512, qk_rope_head_dim=64, index_head_dim=128)
# The tiny checkpoints of cpu-anchors.md.
KIMI_TINY = KVSpec("mla", 4, "bf16", kv_lora_rank=64, qk_rope_head_dim=16)
GLM4_TINY = KVSpec("gqa", 4, "bf16", num_kv_heads=2, head_dim=64, v_head_dim=64)
GLMDSA_TINY = KVSpec("mla", 4, "bf16", kv_lora_rank=64, qk_rope_head_dim=16, index_head_dim=64)


@pytest.mark.parametrize(
    ("spec", "bf16", "fp8"),
    [
        (KIMI_K2, 70_272, 35_136),
        (GLM_45, 376_832, 188_416),
        (GLM_52, 89_856 + 78 * 128 * 2, 44_928 + 78 * 128),  # latent + rope, plus indexer keys
    ],
)
def test_bytes_per_token_of_full_size_models(spec: KVSpec, bf16: int, fp8: int) -> None:
    assert spec.cell_size == bf16
    for name in ("fp8_e4m3", "fp8_e5m2"):  # one byte an element either way, static scales
        assert spec.with_dtype(name).cell_size == fp8  # type: ignore[arg-type]
        assert spec.with_dtype(name).scale_bytes == spec.num_layers * spec.num_components * 4  # type: ignore[arg-type]


def test_seed_figure_686k_to_1_37m_tokens() -> None:
    """GLM-5.2's latent cache (no indexer) in the seed's budget: 686k BF16 tokens -> 1.372M FP8."""
    latent_only = KVSpec("mla", 78, "bf16", kv_lora_rank=512, qk_rope_head_dim=64)
    budget = 686_000 * latent_only.cell_size
    bf16 = kv_capacity(latent_only, budget, page_size=64)
    fp8 = kv_capacity(latent_only.with_dtype("fp8_e4m3"), budget, page_size=64)
    assert bf16.max_total_num_tokens == 685_952  # whole pages of 64
    assert fp8.max_total_num_tokens == 1_371_968
    assert fp8.max_total_num_tokens / bf16.max_total_num_tokens >= 1.99


@pytest.mark.parametrize("spec", [KIMI_K2, GLM_45, GLM_52, KIMI_TINY, GLM4_TINY, GLMDSA_TINY])
def test_fp8_scales_stay_outside_the_budget_as_in_sglang(spec: KVSpec) -> None:
    """A budget of exactly N BF16 pages holds exactly 2N FP8 pages: SGLang's ``cell_size`` division
    with no room taken for the static scales, which live with the weights."""
    page = 16
    budget = 64 * page * spec.cell_size
    fp8_spec = spec.with_dtype("fp8_e4m3")
    fp8 = kv_capacity(fp8_spec, budget, page)
    assert kv_capacity(spec, budget, page).num_pages == 64
    assert fp8.num_pages == 128
    assert fp8.used_bytes == budget
    assert fp8.scale_bytes == fp8_spec.scale_bytes > 0


@pytest.mark.parametrize("spec", [KIMI_K2, GLM_45, GLM_52, KIMI_TINY, GLM4_TINY, GLMDSA_TINY])
@pytest.mark.parametrize("pages", [100, 1_001, 77_777])
def test_fp8_holds_about_twice_the_tokens_of_bf16(spec: KVSpec, pages: int) -> None:
    """At budgets from 100 BF16 pages up, odd byte counts included."""
    page = 16
    budget = pages * page * spec.cell_size + 12_345
    bf16 = kv_capacity(spec, budget, page)
    fp8 = kv_capacity(spec.with_dtype("fp8_e4m3"), budget, page)
    assert fp8.max_total_num_tokens / bf16.max_total_num_tokens >= 1.99
    assert fp8.used_bytes <= budget and bf16.used_bytes <= budget


def test_capacity_is_budget_over_cell_size_in_whole_pages() -> None:
    cap = kv_capacity(KIMI_TINY, 1_000_000, page_size=16)
    assert cap.cell_size == 4 * 80 * 2
    assert cap.max_total_num_tokens == (1_000_000 // 640) // 16 * 16
    assert cap.padding_page_bytes == 16 * 640


def test_bad_values_are_named() -> None:
    with pytest.raises(ConfigError, match="kv_cache_dtype"):
        parse_kv_dtype("int3")
    assert parse_kv_dtype("auto", "float32") == "float32"
    assert parse_kv_dtype("fp8_e4m3") == "fp8_e4m3"
    assert parse_kv_dtype("fp8_e5m2") == "fp8_e5m2"  # SGLang's other FP8 KV format
    with pytest.raises(ConfigError, match="kv_cache_bytes"):
        kv_capacity(KIMI_TINY, 100, page_size=16)


@pytest.mark.parametrize("name", ["kimi-k2", "kimi-k2.5", "glm-4.7", "glm-5.2"])
def test_layout_from_the_shipped_full_size_configs(name: str) -> None:
    """The pool's layout agrees with ``ember models inspect``'s accounting for real configs."""
    from ember.models.accounting import kv_bytes_per_token
    from ember.models.catalog import reference_configs
    from ember.models.config_parse import load_config

    config = load_config(reference_configs()[name])
    for dtype, accounting_dtype in (("bf16", "bf16"), ("fp8_e4m3", "fp8")):
        spec = kv_layout_for(config, dtype)
        assert spec.cell_size == kv_bytes_per_token(config, accounting_dtype).total
    if name.startswith("kimi"):
        assert kv_layout_for(config, "bf16").cell_size == 70_272
    if name == "glm-5.2":  # IndexShare: only the "full" layers cache indexer keys
        spec = kv_layout_for(config, "fp8_e4m3")
        assert 0 < len(spec.index_layers) < spec.num_layers
        assert spec.cell_size == 44_928 + 128 * len(spec.index_layers)


def test_budget_from_mem_fraction_static_follows_sglang() -> None:
    gib = 1 << 30
    # 24 GiB machine, 20 GiB free after loading weights, keep 0.88 for weights + KV.
    assert kv_budget_from_fraction(24 * gib, 20 * gib, 0.88) == 20 * gib - int(24 * gib * 0.12)
    with pytest.raises(ConfigError, match="mem_fraction_static"):
        kv_budget_from_fraction(24 * gib, 2 * gib, 0.5)
    with pytest.raises(ConfigError, match="mem_fraction_static"):
        kv_budget_from_fraction(24 * gib, 20 * gib, 1.5)
