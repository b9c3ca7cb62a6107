"""The checkpoints the server tests serve: the shipped tiny checkpoints once they are built, and
until then random-init weights saved with the very same config.json and tokenizer files."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from ember.models.arch import build_model
from ember.models.catalog import SHIPPED_CHECKPOINTS
from ember.models.config_parse import parse_config
from ember.models.loader import save_checkpoint
from ember.models.training.pipeline import specs

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
# glmdsa-tiny speaks the GLM chat family: until it is built, borrow glm4moe-tiny's tokenizer.
TOKENIZER_SOURCE = {
    "kimi-tiny": "kimi-tiny",
    "glm4moe-tiny": "glm4moe-tiny",
    "glmdsa-tiny": "glm4moe-tiny",
}


def checkpoint_dir(name: str, scratch: Path) -> Path:
    """The shipped checkpoint ``name`` if built, else a random-init stand-in under ``scratch``."""
    shipped = SHIPPED_CHECKPOINTS / name
    if (shipped / "config.json").is_file():
        return shipped
    out = scratch / name
    if (out / "config.json").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    spec = specs()[name]
    config = parse_config(spec.hf_config, source=f"{name} (random init)")
    torch.manual_seed(0)
    model = build_model(config)
    save_checkpoint(model, out, dtype=torch.bfloat16)
    source = SHIPPED_CHECKPOINTS / TOKENIZER_SOURCE[name]
    for file in TOKENIZER_FILES:
        shutil.copy(source / file, out / file)
    return out
