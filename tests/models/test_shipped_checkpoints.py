"""The checkpoints that ship inside the package: each is built, small, of its architecture, loads
in ember and in transformers with the same float32 logits, and its catalog ids resolve to it."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest
import torch

from ember.models.catalog import SHIPPED, SHIPPED_CHECKPOINTS, default_catalog
from ember.models.config_parse import load_config
from ember.models.layers.indexer import Indexer
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
def test_shipped_checkpoint_logits_match_transformers(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both load the bf16 weights into float32; the sequence is longer than glmdsa-tiny's
    index_topk (128), so its indexer really selects.

    Where the indexer's k-th and (k+1)-th scores tie, transformers leaves the choice to
    ``torch.topk``, whose pick among equal scores depends on the row's length (the prompt's in
    a prefill, the cache's in a decode, the padded one in a batch): the oracle is ambiguous
    there, and ember's rule (the earliest position) is one valid reading. Such ties are common
    (relu zeroes whole scores: ~2% of rows on random text, some in every draw of 2 x 160
    tokens), so ember's reference here takes transformers' picks, after checking that they are
    a top-k of ember's own scores and that ember picks the same wherever the cut is not tied.
    """
    transformers = pytest.importorskip("transformers")
    root = SHIPPED_CHECKPOINTS / name
    ours = load_model(root).model
    model_class = getattr(transformers, SHIPPED[name])
    hf = model_class.from_pretrained(root, dtype=torch.float32, attn_implementation="eager")
    seed = random.randrange(2**31)
    ids = torch.randint(
        0, ours.config.vocab_size, (2, 160), generator=torch.Generator().manual_seed(seed)
    )
    theirs: dict[int, torch.Tensor] = {}
    for i, layer in enumerate(hf.model.layers):
        indexer = getattr(layer.self_attn, "indexer", None)
        if indexer is not None:
            indexer.register_forward_hook(lambda _m, _a, out, i=i: theirs.__setitem__(i, out))
    expected = hf.eval()(input_ids=ids).logits
    for i, layer in enumerate(ours.model.layers):
        indexer = getattr(layer.self_attn, "indexer", None)
        if indexer is not None:
            follow = _following(indexer, theirs[i].long(), f"{name} seed {seed} layer {i}")
            monkeypatch.setattr(indexer, "reference_topk", follow)
    error = tiny.relative_error(ours.reference_forward(ids), expected)
    assert error < TOLERANCE, f"{name} seed {seed}: relative error {error}"


def _following(indexer: Indexer, picks: torch.Tensor, where: str) -> Callable[..., torch.Tensor]:
    """``indexer.reference_topk`` that checks transformers' ``picks`` (B, S, K) against ember's
    scores and selection, then returns them."""
    original = indexer.reference_topk

    def reference_topk(x, q_resid, cos, sin) -> torch.Tensor:
        own = original(x, q_resid, cos, sin)
        scores = indexer.index_scores(*indexer.project(x, q_resid, cos, sin))  # (B, S, S)
        count = picks.shape[-1]
        for b, t in itertools.product(range(scores.shape[0]), range(count, scores.shape[1])):
            row = scores[b, t, : t + 1]  # causal positions, more than K of them
            kept = torch.zeros(t + 1, dtype=torch.bool)
            kept[picks[b, t]] = True
            tol = 1e-5 * float(row.abs().max())  # the two sum the heads in different orders
            low, high = float(row[kept].min()), float(row[~kept].max())
            assert low >= high - tol, f"{where} row {b},{t}: not a top-{count} of ember's scores"
            if low > high + tol:  # no tie at the cut: a unique answer, and ember's too
                assert sorted(own[b, t].tolist()) == sorted(picks[b, t].tolist()), where
        return picks

    return reference_topk
