"""Pre-quantized checkpoints: config parsing, tensor layouts, and loading a whole tiny model."""

from __future__ import annotations

import copy

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ember.errors import CheckpointError
from ember.models.quant import (
    CheckpointQuantization,
    QuantConfig,
    QuantizedLinear,
    load_quantized_linears,
    parse_checkpoint_quantization,
    quantize_model,
    scheme_for,
)
from ember.models.quant.checkpoint import fp8_checkpoint_tensors, int4_checkpoint_tensors
from ember.models.quant.fp8 import quantize_fp8_block
from ember.models.quant.int4 import quantize_int4
from tests.models.quant.kimi_tiny import build_kimi

# As published: DeepSeek-V3 / Kimi K2 FP8 and Kimi K2-Thinking (compressed-tensors) configs.
FP8_CONFIG = {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
}
INT4_CONFIG = {
    "config_groups": {
        "group_0": {
            "input_activations": None,
            "output_activations": None,
            "targets": ["Linear"],
            "weights": {
                "actorder": None,
                "dynamic": False,
                "group_size": 32,
                "num_bits": 4,
                "observer": "minmax",
                "strategy": "group",
                "symmetric": True,
                "type": "int",
            },
        }
    },
    "format": "pack-quantized",
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}


def test_parse_published_configs() -> None:
    assert parse_checkpoint_quantization(FP8_CONFIG) == CheckpointQuantization("fp8")
    assert parse_checkpoint_quantization(INT4_CONFIG) == CheckpointQuantization(
        "int4", group_size=32
    )


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"quant_method": "gptq"}, "quant_method is 'gptq'"),
        ({"fmt": "e5m2"}, "fmt is 'e5m2'"),
        ({"weight_block_size": [128]}, "weight_block_size"),
    ],
)
def test_unreadable_fp8_configs_are_checkpoint_errors(patch: dict, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        parse_checkpoint_quantization({**FP8_CONFIG, **patch})


@pytest.mark.parametrize(
    ("field", "value"), [("symmetric", False), ("num_bits", 8), ("group_size", 16)]
)
def test_unreadable_int4_configs_name_the_field(field: str, value: object) -> None:
    config = copy.deepcopy(INT4_CONFIG)
    config["config_groups"]["group_0"]["weights"][field] = value
    with pytest.raises(CheckpointError, match=f"weights.{field}"):
        parse_checkpoint_quantization(config)


def test_int4_tensors_follow_compressed_tensors_layout() -> None:
    w = torch.randn(64, 96)
    q = quantize_int4(w, 32)
    tensors = int4_checkpoint_tensors("layer", q)
    packed = tensors["layer.weight_packed"]
    assert packed.dtype == torch.int32 and packed.shape == (64, 96 // 8)
    assert tensors["layer.weight_scale"].shape == (64, 3)
    assert tensors["layer.weight_shape"].tolist() == [64, 96]
    # Unpack the int32 words the way compressed-tensors does: offset-coded nibbles, low first.
    shifts = torch.arange(8, dtype=torch.int32) * 4
    signed = ((packed.unsqueeze(-1) >> shifts) & 0xF).reshape(64, 96) - 8
    scale = tensors["layer.weight_scale"].float().repeat_interleave(32, dim=1)
    restored = signed.float() * scale
    assert float((restored - w).abs().max()) <= float(scale.max()) * 0.5 * 1.01


def _save_quantized_state(model: nn.Module, path: str, scheme: str) -> None:
    """Write a checkpoint as the published tools lay it out: quantized linears + the rest."""
    selected = QuantConfig(scheme=scheme, targets="experts" if scheme == "int4" else "all")
    tensors: dict[str, torch.Tensor] = {}
    quantized: set[str] = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and scheme_for(name, selected) == scheme:
            quantized.add(f"{name}.weight")
            if scheme == "fp8":
                tensors |= fp8_checkpoint_tensors(name, quantize_fp8_block(module.weight))
            else:
                tensors |= int4_checkpoint_tensors(name, quantize_int4(module.weight, 32))
    for name, tensor in model.state_dict().items():
        if name not in quantized:
            tensors[name] = tensor.contiguous()
    save_file(tensors, path)


@pytest.mark.parametrize("scheme", ["fp8", "int4"])
def test_load_pre_quantized_tiny_model_through_safetensors(tmp_path, scheme: str) -> None:
    source = build_kimi(seed=21, vocab_size=512)
    path = str(tmp_path / "model.safetensors")
    _save_quantized_state(source, path, scheme)
    tensors = load_file(path)
    config = FP8_CONFIG if scheme == "fp8" else INT4_CONFIG
    quant = parse_checkpoint_quantization(config)

    fresh = build_kimi(seed=99, vocab_size=512)  # different weights
    used = load_quantized_linears(fresh, tensors, quant, compute_dtype=torch.bfloat16)
    missing, unexpected = fresh.load_state_dict(
        {k: v for k, v in tensors.items() if k not in used}, strict=False
    )
    assert unexpected == []
    assert all(".weight_" not in k for k in tensors if k not in used)

    # The same weights quantized in memory must give the same logits.
    expected = copy.deepcopy(source)
    targets = "experts" if scheme == "int4" else "all"
    quantize_model(expected, QuantConfig(scheme=scheme, targets=targets))
    ids = torch.randint(0, 512, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(
            fresh.reference_forward(ids), expected.reference_forward(ids), rtol=0, atol=0
        )
    quantized = [m for m in fresh.modules() if isinstance(m, QuantizedLinear)]
    assert len(quantized) == (24 if scheme == "int4" else 38)


def test_shape_mismatch_names_the_tensor() -> None:
    model = build_kimi(seed=3, vocab_size=256)
    q = quantize_fp8_block(torch.randn(128, 300))
    tensors = fp8_checkpoint_tensors("model.layers.0.mlp.gate_proj", q)
    with pytest.raises(CheckpointError, match=r"model\.layers\.0\.mlp\.gate_proj\.weight.*shape"):
        load_quantized_linears(
            model, tensors, CheckpointQuantization("fp8"), compute_dtype=torch.float32
        )
