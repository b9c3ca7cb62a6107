"""Load and save HF-layout checkpoints of the three architectures.

Loading builds the model on the meta device, checks every tensor of every weight file against the
model's parameters by name and shape *before* reading any data, then reads each file once and
assigns the tensors. Anything amiss is a ``CheckpointError`` naming the file and the tensor:
a missing file, a tensor the model lacks (or lacks a file for), a shape mismatch.

Tensors that are not part of the model ember runs are skipped: multi-token-prediction layers
(``model.layers.<num_hidden_layers + i>``), and for multimodal wrappers (Kimi K2.5) everything
outside the text model's ``language_model.`` prefix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from ember.errors import CheckpointError
from ember.models.arch import CausalLM, build_model
from ember.models.checkpoint import (
    CONFIG_FILE,
    GENERATION_CONFIG_FILE,
    CheckpointFiles,
    find_checkpoint_files,
    write_safetensors,
)
from ember.models.config import ModelConfig
from ember.models.config_parse import load_config
from ember.models.generation import GenerationConfig, read_generation_config

_LAYER = re.compile(r"^model\.layers\.(\d+)\.")
# Router tensors stay float32 whatever dtype the model is loaded or saved in.
_FLOAT32_SUFFIXES = (".mlp.gate.weight", ".mlp.gate.e_score_correction_bias")
_SAVED_FLOAT32_SUFFIXES = (".mlp.gate.e_score_correction_bias",)


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A model ready to run, with the configs it was built from."""

    model: CausalLM
    config: ModelConfig
    generation: GenerationConfig
    directory: Path


def load_model(
    directory: str | Path,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> LoadedModel:
    """Load a checkpoint directory (config.json + safetensors) into an eval-mode model."""
    root = Path(directory)
    config = load_config(root)
    if config.quantization_method is not None:
        raise CheckpointError(
            f"{config.source}: quantization_config.quant_method is "
            f"{config.quantization_method!r}; this loader reads unquantized (BF16/FP32) weights"
        )
    files = find_checkpoint_files(root)
    model = build_model(config, device="meta")
    plan = _plan(model, config, files)
    state: dict[str, torch.Tensor] = {}
    for file, names in plan.items():
        for name, tensor in files.read(file, [ckpt for ckpt, _ in names]).items():
            ours = dict(names)[name]
            target = torch.float32 if ours.endswith(_FLOAT32_SUFFIXES) else dtype
            state[ours] = tensor.to(device=device, dtype=target)
    model.load_state_dict(state, strict=False, assign=True)
    model.tie_weights()
    model.eval()
    generation = read_generation_config(root / GENERATION_CONFIG_FILE, config)
    return LoadedModel(model, config, generation, root)


def save_checkpoint(
    model: CausalLM,
    directory: str | Path,
    *,
    dtype: torch.dtype | None = None,
    generation: GenerationConfig | None = None,
    max_shard_bytes: int | None = None,
) -> None:
    """Write ``model`` as config.json + safetensors (+ index past ``max_shard_bytes``) +
    generation_config.json. ``dtype`` casts weights (e.g. bfloat16 for shipping); the routers'
    score-correction biases stay float32, as in the real checkpoints. Other files in
    ``directory`` (tokenizer, templates) are left alone; old weight files are replaced."""
    root = Path(directory)
    config = model.config
    tensors = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        if dtype is not None and not name.endswith(_SAVED_FLOAT32_SUFFIXES):
            tensor = tensor.to(dtype)
        tensors[name] = tensor.cpu()
    write_safetensors(root, tensors, max_shard_bytes)
    hf_config = config.to_hf_dict()
    if dtype is not None:
        hf_config["dtype"] = str(dtype).removeprefix("torch.")
    _write_json(root / CONFIG_FILE, hf_config)
    generation = generation or GenerationConfig.from_model_config(config)
    _write_json(root / GENERATION_CONFIG_FILE, generation.to_json())


def checkpoint_name(name: str, config: ModelConfig) -> str | None:
    """The model parameter a checkpoint tensor feeds, or None when ember skips the tensor."""
    if config.weight_prefix:
        if not name.startswith(config.weight_prefix):
            return None  # vision tower, projector...
        name = name.removeprefix(config.weight_prefix)
    layer = _LAYER.match(name)
    if layer and int(layer.group(1)) >= config.num_hidden_layers:
        return None  # multi-token-prediction layers
    if name.endswith("rotary_emb.inv_freq"):
        return None  # a derived buffer some old checkpoints store
    return name


def _plan(
    model: CausalLM, config: ModelConfig, files: CheckpointFiles
) -> dict[Path, list[tuple[str, str]]]:
    """file -> [(checkpoint tensor name, model parameter name)], after checking names and shapes."""
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    if config.tie_word_embeddings:
        expected.pop("lm_head.weight")
    plan: dict[Path, list[tuple[str, str]]] = {}
    found: dict[str, Path] = {}
    for file, name, shape in files.tensor_shapes():
        if files.weight_map is not None and files.weight_map.get(name) != file.name:
            listed = files.weight_map.get(name)
            raise CheckpointError(
                f"{file}: holds tensor {name!r}, but the index lists it in {listed!r}"
            )
        ours = checkpoint_name(name, config)
        if ours is None:
            continue
        if ours not in expected:
            raise CheckpointError(
                f"{file}: unexpected tensor {name!r}: {config.architecture} as configured in "
                f"{config.source} has no such parameter"
            )
        if shape != expected[ours]:
            raise CheckpointError(
                f"{file}: tensor {name!r} has shape {list(shape)}, "
                f"expected {list(expected[ours])} from {config.source}"
            )
        if ours in found:
            raise CheckpointError(f"{file}: tensor {name!r} also appears in {found[ours]}")
        found[ours] = file
        plan.setdefault(file, []).append((name, ours))
    missing = sorted(set(expected) - set(found))
    if missing:
        where = ", ".join(str(f) for f in files.weight_files)
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CheckpointError(
            f"{where}: missing tensor {config.weight_prefix + missing[0]!r}{more}"
        )
    return plan


def _write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
