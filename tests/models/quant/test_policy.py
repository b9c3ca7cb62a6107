"""quantize_model by policy on a whole tiny model: what is swapped, bytes, and logits vs BF16."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ember.errors import ConfigError
from ember.models.quant import (
    QuantConfig,
    QuantizedLinear,
    model_weight_bytes,
    quantize_model,
    scheme_for,
)
from ember.models.quant.accounting import matrix_nbytes
from ember.models.quant.int4_kernel import cpu_int4_kernel_available, int4_kernel_dtype
from tests.models.quant.kimi_tiny import build_kimi

IDS = torch.randint(0, 2048, (2, 24), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def bf16_model() -> nn.Module:
    return build_kimi(seed=11)


@pytest.fixture(scope="module")
def bf16_logits(bf16_model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return bf16_model.reference_forward(IDS).float()


def _quantized(model: nn.Module, config: QuantConfig) -> nn.Module:
    copied = copy.deepcopy(model)
    quantize_model(copied, config)
    return copied


def _compare(model: nn.Module, reference: torch.Tensor) -> tuple[float, float, float]:
    with torch.no_grad():
        logits = model.reference_forward(IDS).float()
    rel = float((logits - reference).norm() / reference.norm())
    kl = float(
        F.kl_div(
            logits.log_softmax(-1), reference.log_softmax(-1), log_target=True, reduction="none"
        )
        .sum(-1)
        .mean()
    )
    top1 = float((logits.argmax(-1) == reference.argmax(-1)).float().mean())
    return rel, kl, top1


def _quantized_names(model: nn.Module) -> dict[str, str]:
    return {
        name: m.method.scheme for name, m in model.named_modules() if isinstance(m, QuantizedLinear)
    }


def test_experts_policy_swaps_only_routed_experts(bf16_model: nn.Module) -> None:
    model = copy.deepcopy(bf16_model)
    report = quantize_model(model, QuantConfig(scheme="int4", targets="experts"))
    names = _quantized_names(model)
    assert len(names) == 8 * 3 and report.layers == {"int4": 24}
    assert all(".mlp.experts." in n for n in names)
    assert isinstance(model.model.layers[1].mlp.shared_experts.up_proj, nn.Linear)
    assert isinstance(model.model.layers[0].mlp.up_proj, nn.Linear)  # the dense layer
    assert report.bytes_before == 24 * 128 * 256 * 2
    per = matrix_nbytes("int4", 128, 256, int4_layout="cpu_kernel")
    assert report.bytes_after in (24 * per, 24 * matrix_nbytes("int4", 128, 256))


def test_all_policy_never_touches_router_embeddings_norms_kv_b_or_lm_head(
    bf16_model: nn.Module,
) -> None:
    model = copy.deepcopy(bf16_model)
    quantize_model(model, QuantConfig(scheme="fp8", targets="all"))
    names = _quantized_names(model)
    linear_left = {n for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    assert linear_left == {
        "lm_head",
        "model.layers.0.self_attn.kv_b_proj",
        "model.layers.1.self_attn.kv_b_proj",
    }
    assert "model.layers.1.mlp.shared_experts.down_proj" in names
    assert isinstance(model.model.embed_tokens, nn.Embedding)
    assert not isinstance(model.model.layers[1].mlp.gate, QuantizedLinear)
    with_head = copy.deepcopy(bf16_model)
    quantize_model(with_head, QuantConfig(scheme="fp8", targets="all", include_lm_head=True))
    assert isinstance(with_head.lm_head, QuantizedLinear)


def test_tied_lm_head_is_left_alone() -> None:
    model = build_kimi(seed=1, tie_word_embeddings=True)
    quantize_model(model, QuantConfig(scheme="int4", targets="all", include_lm_head=True))
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_scheme_for_names() -> None:
    experts = QuantConfig(scheme="int4", targets="experts", others="fp8", skip=(r"layers\.3\.",))
    assert scheme_for("model.layers.1.mlp.experts.17.down_proj", experts) == "int4"
    assert scheme_for("model.layers.1.mlp.shared_experts.down_proj", experts) == "fp8"
    assert scheme_for("model.layers.1.self_attn.q_b_proj", experts) == "fp8"
    assert scheme_for("model.layers.1.mlp.gate", experts) == "none"
    assert scheme_for("model.layers.3.mlp.experts.0.up_proj", experts) == "none"
    assert scheme_for("lm_head", experts) == "none"


# (max relative logit error, max KL, min top-1 agreement): measured on this model (seed 11) and
# loosened ~1.5-2x. For scale: BF16 vs FP32 of the same model is rel 0.07, KL 0.003, top-1 0.875
# (random weights give flat logits). Per-layer error is ~2.7% (FP8) and ~9% (INT4 g32) on
# Gaussian weights, and "all" stacks every matmul of the token's path.
CASES = [
    (QuantConfig(scheme="fp8", targets="experts"), 0.06, 0.002, 0.85),
    (QuantConfig(scheme="int4", targets="experts"), 0.2, 0.012, 0.65),
    (QuantConfig(scheme="int4", targets="experts", group_size=128), 0.23, 0.015, 0.6),
    (QuantConfig(scheme="int4", targets="experts", others="fp8"), 0.3, 0.03, 0.55),
    (QuantConfig(scheme="fp8", targets="all"), 0.25, 0.02, 0.6),
    (QuantConfig(scheme="int4", targets="all", symmetric=False), 0.8, 0.25, 0.3),
]


@pytest.mark.parametrize(("config", "max_rel", "max_kl", "min_top1"), CASES)
def test_quantized_logits_stay_close_to_bf16(
    bf16_model: nn.Module,
    bf16_logits: torch.Tensor,
    config: QuantConfig,
    max_rel: float,
    max_kl: float,
    min_top1: float,
) -> None:
    model = _quantized(bf16_model, config)
    rel, kl, top1 = _compare(model, bf16_logits)
    assert rel > 1e-3  # something was quantized
    assert rel < max_rel and kl < max_kl and top1 >= min_top1, (rel, kl, top1)


def test_int4_from_fp8_goes_through_float32(
    bf16_model: nn.Module, bf16_logits: torch.Tensor
) -> None:
    """The seed's path: FP8 everywhere, then routed experts requantized to INT4."""
    model = _quantized(bf16_model, QuantConfig(scheme="fp8", targets="all"))
    report = quantize_model(model, QuantConfig(scheme="int4", targets="experts"))
    assert report.layers == {"int4": 24}
    schemes = set(_quantized_names(model).values())
    assert schemes == {"fp8", "int4"}
    # As close to BF16 as quantizing each layer once (int4 experts + fp8 rest) is.
    direct = _quantized(bf16_model, QuantConfig(scheme="int4", targets="experts", others="fp8"))
    _, kl_requantized, _ = _compare(model, bf16_logits)
    _, kl_direct, _ = _compare(direct, bf16_logits)
    assert kl_requantized < 1.5 * kl_direct + 1e-3, (kl_requantized, kl_direct)


def test_weight_bytes_shrink_as_expected(bf16_model: nn.Module) -> None:
    dense = model_weight_bytes(bf16_model)
    int4 = model_weight_bytes(_quantized(bf16_model, QuantConfig(scheme="int4", targets="all")))
    fp8 = model_weight_bytes(_quantized(bf16_model, QuantConfig(scheme="fp8", targets="all")))
    assert dense.by_scheme["other"] == int4.by_scheme["other"] == fp8.by_scheme["other"]
    assert fp8.by_scheme["fp8"] < 0.51 * (dense.by_scheme["none"] - fp8.by_scheme["none"])
    assert int4.by_scheme["int4"] < 0.33 * (dense.by_scheme["none"] - int4.by_scheme["none"])


def test_bad_policy_values_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="targets"):
        QuantConfig(scheme="int4", targets="attention")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="group_size"):
        QuantConfig(scheme="int4", group_size=16)
    with pytest.raises(ConfigError, match="--quantization"):
        QuantConfig.from_flag("int2")
    assert QuantConfig.from_flag("BF16").scheme == "none"
    assert QuantConfig.from_flag("int4", group_size=128).group_size == 128
    with pytest.raises(ConfigError, match="int4_kernel_dtype.*bfloat16, float16 or float32"):
        QuantConfig(scheme="int4", int4_kernel_dtype=torch.float64)


def _kernel_dtypes(model: nn.Module) -> set[torch.dtype]:
    return {
        m.kernel_scales_and_zeros.dtype
        for m in model.modules()
        if isinstance(m, QuantizedLinear) and "kernel_scales_and_zeros" in m._buffers
    }


@pytest.mark.skipif(not cpu_int4_kernel_available(), reason="no CPU int4 kernel")
def test_a_float32_model_runs_int4_in_the_kernel_dtype_this_cpu_vectorises(
    bf16_model: nn.Module,
) -> None:
    model = copy.deepcopy(bf16_model).float()
    report = quantize_model(model, QuantConfig(scheme="int4", targets="experts"))
    chosen = int4_kernel_dtype(torch.float32)
    assert report.int4_kernel_dtype is chosen
    assert _kernel_dtypes(model) == {chosen}
    # The knob forces it (how benchmarks measure the float32 kernel on any CPU).
    forced = copy.deepcopy(bf16_model).float()
    config = QuantConfig(scheme="int4", targets="experts", int4_kernel_dtype=torch.float32)
    assert quantize_model(forced, config).int4_kernel_dtype is torch.float32
    assert _kernel_dtypes(forced) == {torch.float32}


def test_the_report_names_no_kernel_dtype_without_int4_kernel_layers(
    bf16_model: nn.Module,
) -> None:
    model = copy.deepcopy(bf16_model)
    assert quantize_model(model, QuantConfig(scheme="fp8")).int4_kernel_dtype is None
    reference = QuantConfig(scheme="int4", use_kernels=False)
    assert quantize_model(copy.deepcopy(bf16_model), reference).int4_kernel_dtype is None
