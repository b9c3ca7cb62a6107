"""The files of an HF-layout checkpoint directory: which exist, which tensor lives where.

Layout (what transformers writes and the hubs serve)::

    config.json
    generation_config.json                 optional
    model.safetensors                      one file, or
    model-00001-of-0000N.safetensors ...   shards, listed by
    model.safetensors.index.json           {"metadata": {...}, "weight_map": {tensor: shard}}

tokenizer.json / tokenizer_config.json live in the same directory (``ember.models.tokenizer``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ember.errors import CheckpointError

CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


@dataclass(frozen=True, slots=True)
class CheckpointFiles:
    """The weight files of one checkpoint and, for sharded ones, the index's tensor -> file map."""

    directory: Path
    weight_files: tuple[Path, ...]
    weight_map: Mapping[str, str] | None  # from the index file; None for a single file

    def tensor_shapes(self) -> Iterator[tuple[Path, str, tuple[int, ...]]]:
        """Every (file, tensor name, shape) without reading any tensor data."""
        for file in self.weight_files:
            with _open(file) as reader:
                for name in reader.keys():
                    yield file, name, tuple(reader.get_slice(name).get_shape())

    def read(self, file: Path, names: list[str]) -> dict[str, torch.Tensor]:
        """Read ``names`` from ``file``."""
        with _open(file) as reader:
            return {name: reader.get_tensor(name) for name in names}


def find_checkpoint_files(directory: str | Path) -> CheckpointFiles:
    """Locate the safetensors of ``directory``; a missing or inconsistent file is an error."""
    root = Path(directory)
    if not root.is_dir():
        raise CheckpointError(f"{root}: not a checkpoint directory (it does not exist)")
    index = root / INDEX_FILE
    if index.is_file():
        weight_map = _read_index(index)
        files = []
        for shard in sorted(set(weight_map.values())):
            path = root / shard
            if not path.is_file():
                owner = next(name for name, f in weight_map.items() if f == shard)
                raise CheckpointError(f"{path}: missing (the index lists {owner!r} in it)")
            files.append(path)
        return CheckpointFiles(root, tuple(files), weight_map)
    single = root / SINGLE_FILE
    if single.is_file():
        return CheckpointFiles(root, (single,), None)
    raise CheckpointError(
        f"{root}: no weights (expected {SINGLE_FILE}, or {INDEX_FILE} with its shards)"
    )


def write_safetensors(
    directory: Path, tensors: Mapping[str, torch.Tensor], max_shard_bytes: int | None = None
) -> list[Path]:
    """Write ``tensors`` as ``model.safetensors`` or, past ``max_shard_bytes``, as shards + index.

    Old weight files in ``directory`` are removed first so a reader never mixes two saves.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for old in [*directory.glob("model*.safetensors"), directory / INDEX_FILE]:
        old.unlink(missing_ok=True)
    shards: list[dict[str, torch.Tensor]] = [{}]
    shard_bytes = 0
    for name in sorted(tensors):
        tensor = tensors[name].detach().contiguous()
        if tensor.untyped_storage().nbytes() != tensor.numel() * tensor.element_size():
            # A view into a larger tensor (the MoE stacks its experts' weights): safetensors
            # refuses tensors that share storage, so write a copy of just this view.
            tensor = tensor.clone()
        size = tensor.numel() * tensor.element_size()
        if max_shard_bytes is not None and shards[-1] and shard_bytes + size > max_shard_bytes:
            shards.append({})
            shard_bytes = 0
        shards[-1][name] = tensor
        shard_bytes += size
    metadata = {"format": "pt"}
    if len(shards) == 1:
        path = directory / SINGLE_FILE
        save_file(shards[0], str(path), metadata=metadata)
        return [path]
    paths, weight_map = [], {}
    for i, shard in enumerate(shards, start=1):
        path = directory / f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(path), metadata=metadata)
        paths.append(path)
        weight_map.update({name: path.name for name in shard})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX_FILE).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return paths


def _read_index(path: Path) -> dict[str, str]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc})") from None
    weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and "/" not in v and v
        for k, v in weight_map.items()
    ):
        raise CheckpointError(f"{path}: weight_map must map tensor names to shard file names")
    return weight_map


def _open(file: Path):  # noqa: ANN202 - safetensors' reader type is private
    try:
        return safe_open(str(file), framework="pt")
    except Exception as exc:  # safetensors raises its own SafetensorError and OSError
        raise CheckpointError(f"{file}: not a readable safetensors file ({exc})") from None
