"""Checkpoint directories: save/load round trips and errors that name the file and the tensor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch.overrides import TorchFunctionMode

from ember.errors import CheckpointError
from ember.models.arch import CausalLM, build_model
from ember.models.config_parse import parse_config
from ember.models.generation import GenerationConfig
from ember.models.loader import load_model, save_checkpoint
from tests.models import tiny


def _saved(tmp_path: Path, arch: str = "kimi", **overrides: object) -> CausalLM:
    model = build_model(parse_config(tiny.ALL[arch](**overrides)))
    tiny.randomize_(model, 7)
    save_checkpoint(model, tmp_path)
    return model


def _same_logits(a: CausalLM, b: CausalLM) -> None:
    ids = torch.randint(0, a.config.vocab_size, (1, 7))
    with torch.no_grad():
        torch.testing.assert_close(a.reference_forward(ids), b.reference_forward(ids))


@pytest.mark.parametrize("arch", sorted(tiny.ALL))
def test_round_trip_single_file(arch: str, tmp_path: Path) -> None:
    model = _saved(tmp_path, arch)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json",
        "generation_config.json",
        "model.safetensors",
    ]
    loaded = load_model(tmp_path)
    assert loaded.config == model.config
    _same_logits(loaded.model, model)


def test_round_trip_sharded_replaces_old_weights(tmp_path: Path) -> None:
    _saved(tmp_path)
    model = build_model(parse_config(tiny.kimi()))
    tiny.randomize_(model, 8)
    save_checkpoint(model, tmp_path, max_shard_bytes=100_000)
    assert not (tmp_path / "model.safetensors").exists()
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2
    _same_logits(load_model(tmp_path).model, model)


def test_bfloat16_save_keeps_router_bias_float32(tmp_path: Path) -> None:
    model = build_model(parse_config(tiny.glm4()))
    save_checkpoint(model, tmp_path, dtype=torch.bfloat16)
    tensors = load_file(tmp_path / "model.safetensors")
    assert tensors["model.layers.1.mlp.experts.0.gate_proj.weight"].dtype == torch.bfloat16
    assert tensors["model.layers.1.mlp.gate.e_score_correction_bias"].dtype == torch.float32
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "bfloat16"
    loaded = load_model(tmp_path, dtype=torch.bfloat16).model
    assert loaded.model.layers[1].mlp.gate.weight.dtype == torch.float32
    assert loaded.lm_head.weight.dtype == torch.bfloat16


def test_tied_embeddings_are_stored_once(tmp_path: Path) -> None:
    model = _saved(tmp_path, "glm4", tie_word_embeddings=True)
    assert "lm_head.weight" not in load_file(tmp_path / "model.safetensors")
    loaded = load_model(tmp_path).model
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    _same_logits(loaded, model)


def test_generation_config_round_trip(tmp_path: Path) -> None:
    model = build_model(parse_config(tiny.glm4(eos_token_id=[5, 6], bos_token_id=1)))
    generation = GenerationConfig(1, (5, 6), None, True, 0.7, 0.9, 40, 128)
    save_checkpoint(model, tmp_path, generation=generation)
    assert load_model(tmp_path).generation == generation


def test_mtp_layers_and_wrapper_extras_are_skipped(tmp_path: Path) -> None:
    """Kimi K2.5 layout: text weights under language_model., a vision tower, an MTP layer."""
    model = _saved(tmp_path)
    tensors = {
        f"language_model.{k}": v for k, v in load_file(tmp_path / "model.safetensors").items()
    }
    tensors["vision_tower.patch_embed.weight"] = torch.zeros(2, 2)
    tensors["language_model.model.layers.3.eh_proj.weight"] = torch.zeros(2, 2)  # MTP layer
    save_file(tensors, tmp_path / "model.safetensors")
    text = json.loads((tmp_path / "config.json").read_text())
    wrapper = {"architectures": ["KimiK25ForConditionalGeneration"], "text_config": text}
    (tmp_path / "config.json").write_text(json.dumps(wrapper))
    _same_logits(load_model(tmp_path).model, model)


def _rewrite(tmp_path: Path, change) -> Path:  # noqa: ANN001 - a dict -> None callback
    path = tmp_path / "model.safetensors"
    tensors = load_file(path)
    change(tensors)
    save_file(tensors, path)
    return path


def test_missing_tensor_is_named(tmp_path: Path) -> None:
    _saved(tmp_path)
    _rewrite(tmp_path, lambda t: t.pop("model.layers.2.mlp.experts.5.up_proj.weight"))
    with pytest.raises(CheckpointError, match=r"missing tensor 'model\.layers\.2\.mlp\.experts\.5"):
        load_model(tmp_path)


def test_unexpected_tensor_is_named(tmp_path: Path) -> None:
    _saved(tmp_path)
    path = _rewrite(
        tmp_path,
        lambda t: t.update({"model.layers.1.mlp.experts.8.up_proj.weight": torch.zeros(1)}),
    )
    with pytest.raises(CheckpointError) as info:
        load_model(tmp_path)
    assert str(path) in str(info.value)
    assert "unexpected tensor 'model.layers.1.mlp.experts.8.up_proj.weight'" in str(info.value)


def test_shape_mismatch_names_file_tensor_and_shapes(tmp_path: Path) -> None:
    _saved(tmp_path)
    name = "model.layers.0.self_attn.kv_b_proj.weight"
    path = _rewrite(tmp_path, lambda t: t.update({name: torch.zeros(3, 16)}))
    with pytest.raises(CheckpointError) as info:
        load_model(tmp_path)
    message = str(info.value)
    assert str(path) in message and name in message
    assert "has shape [3, 16], expected [80, 16]" in message


def test_missing_files(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        load_model(tmp_path / "nowhere")
    _saved(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no weights"):
        load_model(tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(CheckpointError, match="config.json: missing"):
        load_model(tmp_path)


def test_missing_shard_and_wrong_index(tmp_path: Path) -> None:
    model = build_model(parse_config(tiny.kimi()))
    save_checkpoint(model, tmp_path, max_shard_bytes=100_000)
    index_path = tmp_path / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    name, shard = next(iter(index["weight_map"].items()))
    other = next(s for s in index["weight_map"].values() if s != shard)
    index["weight_map"][name] = other
    index_path.write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=f"holds tensor '{name}', but the index lists it in"):
        load_model(tmp_path)
    (tmp_path / other).unlink()
    with pytest.raises(CheckpointError, match=f"{other}: missing"):
        load_model(tmp_path)


def test_corrupt_safetensors_is_a_checkpoint_error(tmp_path: Path) -> None:
    _saved(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 16)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        load_model(tmp_path)


def test_quantized_checkpoints_are_refused_clearly(tmp_path: Path) -> None:
    _saved(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="quant_method is 'fp8'"):
        load_model(tmp_path)


def test_saved_names_match_the_hf_layout(tmp_path: Path) -> None:
    _saved(tmp_path, "glmdsa")
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as reader:
        names = set(reader.keys())
    for name in [
        "model.layers.1.mlp.experts.7.gate_proj.weight",
        "model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
        "model.layers.1.mlp.gate.e_score_correction_bias",
        "model.layers.0.self_attn.indexer.weights_proj.weight",
        "model.layers.0.self_attn.indexer.k_norm.bias",
    ]:
        assert name in names
    assert not any(n.startswith("model.layers.1.self_attn.indexer") for n in names)  # shared


class _NormalCalls(TorchFunctionMode):
    """Records every ``normal_`` (``Tensor.normal_`` or ``nn.init.normal_``) and its device."""

    def __init__(self) -> None:
        super().__init__()
        self.devices: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") == "normal_":
            tensor = args[0] if args else kwargs["tensor"]  # nn.init.normal_ passes keywords
            self.devices.append(str(tensor.device))
        return func(*args, **kwargs)


@pytest.mark.parametrize("arch", sorted(tiny.ALL))
def test_a_meta_build_draws_no_random_weights(arch: str) -> None:
    # normal_ on a meta tensor runs torch's Python reference, whose first call imports
    # torch._dynamo: ~1.2 CPU-seconds added to every process that loads a checkpoint, for
    # weights that have no values. A CPU build still draws them (the same seed, the same model).
    config = parse_config(tiny.ALL[arch]())
    with _NormalCalls() as calls:
        build_model(config, device="meta")
    assert calls.devices == []
    with _NormalCalls() as calls:
        build_model(config)
    assert "cpu" in calls.devices
