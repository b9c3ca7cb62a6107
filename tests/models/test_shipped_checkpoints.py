"""The checkpoints that ship inside the package: each is built, small, of its architecture, loads
in ember and in transformers with the same float32 logits, and its catalog ids resolve to it."""

from __future__ import annotations

import random

import pytest
import torch

from ember.models.catalog import SHIPPED, SHIPPED_CHECKPOINTS, default_catalog
from ember.models.config_parse import load_config
from ember.models.loader import load_model
from ember.models.training.pipeline import specs
from tests.models import tiny

# The budget per checkpoint ("at most ~25 MB"), in bytes.
MAX_CHECKPOINT_BYTES = 25_000_000
FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
TOLERANCE = 1e-4


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_checkpoint_is_built_complete_and_small(name: str) -> None:
    root = SHIPPED_CHECKPOINTS / name
    assert [f for f in FILES if not (root / f).is_file()] == []
    size = sum(p.stat().st_size for p in root.iterdir() if p.is_file())
    assert size <= MAX_CHECKPOINT_BYTES, f"{name}: {size} bytes"
    config = load_config(root)
    assert config.architecture == SHIPPED[name]
    assert config.vocab_size == specs()[name].hf_config["vocab_size"]


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_catalog_id_of_a_shipped_checkpoint_resolves_to_it(name: str) -> None:
    catalog = default_catalog()
    entries = [e for e in catalog if e.shipped == name]
    assert entries, f"no catalog id runs {name}"
    for entry in entries:
        resolved = catalog.resolve(entry.model_id)
        assert resolved.entry.checkpoint_dir == SHIPPED_CHECKPOINTS / name
        assert resolved.config.architecture == SHIPPED[name]


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(SHIPPED))
@torch.no_grad()
def test_shipped_checkpoint_logits_match_transformers(name: str) -> None:
    """Both load the bf16 weights into float32; the sequence is longer than glmdsa-tiny's
    index_topk (128), so its indexer really selects."""
    transformers = pytest.importorskip("transformers")
    root = SHIPPED_CHECKPOINTS / name
    ours = load_model(root).model
    model_class = getattr(transformers, SHIPPED[name])
    hf = model_class.from_pretrained(root, dtype=torch.float32, attn_implementation="eager")
    seed = random.randrange(2**31)
    ids = torch.randint(
        0, ours.config.vocab_size, (2, 160), generator=torch.Generator().manual_seed(seed)
    )
    error = tiny.relative_error(ours.reference_forward(ids), hf.eval()(input_ids=ids).logits)
    assert error < TOLERANCE, f"{name} seed {seed}: relative error {error}"
