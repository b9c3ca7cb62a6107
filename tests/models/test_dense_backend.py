"""The cache-aware forward through the dense backend equals the cache-free reference forward."""

from __future__ import annotations

import random

import pytest
import torch

from ember.models.arch import CausalLM, build_model
from ember.models.attention.backend import AttentionBackend, BatchLayout
from ember.models.attention.dense import DenseKVCache
from ember.models.config_parse import parse_config
from tests.models import tiny

TOLERANCE = 1e-4


def _model(arch: str, seed: int, **overrides: object) -> CausalLM:
    model = build_model(parse_config(tiny.ALL[arch](**overrides)))
    tiny.randomize_(model, seed)
    return model.eval()


def _reference_last(model: CausalLM, tokens: list[int], count: int) -> torch.Tensor:
    """Reference logits of the last ``count`` positions of ``tokens``."""
    return model.reference_forward(torch.tensor([tokens]))[0, -count:]


class RecordingBackend:
    """Delegates to a real backend and remembers whether the indexer ever went sparse."""

    def __init__(self, inner: AttentionBackend) -> None:
        self.inner = inner
        self.sparse_calls = 0

    @property
    def layout(self) -> BatchLayout:
        return self.inner.layout

    def gqa(self, *args: object, **kwargs: object) -> torch.Tensor:
        return self.inner.gqa(*args, **kwargs)  # type: ignore[arg-type]

    def mla(self, *args: object, **kwargs: object) -> torch.Tensor:
        return self.inner.mla(*args, **kwargs)  # type: ignore[arg-type]

    def indexer_topk(self, *args: object, **kwargs: object) -> torch.Tensor | None:
        selected = self.inner.indexer_topk(*args, **kwargs)  # type: ignore[arg-type]
        self.sparse_calls += selected is not None
        return selected


@pytest.mark.parametrize("arch", sorted(tiny.ALL))
@torch.no_grad()
def test_prefill_then_decode_matches_reference(arch: str) -> None:
    seed = random.randrange(2**31)
    model = _model(arch, seed)
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.config.vocab_size, (11,), generator=gen).tolist()
    cache = DenseKVCache()
    sparse = 0
    prefill = 6
    backend = RecordingBackend(cache.begin(["s"], [prefill]))
    logits = model(torch.tensor(tokens[:prefill]), backend)
    error = tiny.relative_error(logits, _reference_last(model, tokens[:prefill], prefill))
    assert error < TOLERANCE, f"seed {seed}: prefill error {error}"
    for n in range(prefill + 1, len(tokens) + 1):
        backend = RecordingBackend(cache.begin(["s"], [1]))
        assert backend.layout.context_lens == (n - 1,)
        logits = model(torch.tensor(tokens[n - 1 : n]), backend)
        error = tiny.relative_error(logits, _reference_last(model, tokens[:n], 1))
        assert error < TOLERANCE, f"seed {seed}: decode at {n - 1} error {error}"
        sparse += backend.sparse_calls
    if arch == "glmdsa":
        assert sparse > 0, "index_topk < context: the sparse selection must have been used"


@pytest.mark.parametrize("arch", sorted(tiny.ALL))
@torch.no_grad()
def test_mixed_batches_match_reference(arch: str) -> None:
    """Steps mixing new prefills, prefill chunks and decodes of sequences of different lengths."""
    seed = random.randrange(2**31)
    model = _model(arch, seed)
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    tokens = {name: torch.randint(0, vocab, (14,), generator=gen).tolist() for name in "abc"}
    steps = [
        {"a": 5, "b": 3},
        {"a": 1, "b": 4, "c": 6},  # decode, prefill chunk, new prefill
        {"c": 1, "a": 1, "b": 1},  # all decode, order changed
        {"b": 2, "c": 5},  # chunk past index_topk, long chunk
        {"a": 1, "b": 1, "c": 1},
    ]
    cache = DenseKVCache()
    done = dict.fromkeys(tokens, 0)
    for step in steps:
        names = list(step)
        backend = cache.begin(names, [step[n] for n in names])
        ids = [t for n in names for t in tokens[n][done[n] : done[n] + step[n]]]
        full = model(torch.tensor(ids), backend)
        start = 0
        for n in names:
            end = done[n] + step[n]
            ref = _reference_last(model, tokens[n][:end], step[n])
            error = tiny.relative_error(full[start : start + step[n]], ref)
            assert error < TOLERANCE, f"seed {seed}: {n} up to {end} error {error}"
            start += step[n]
            done[n] = end


@torch.no_grad()
def test_logits_indices_selects_rows() -> None:
    model = _model("glm4", 3)
    ids = torch.randint(0, model.config.vocab_size, (7,))
    everything = model(ids, DenseKVCache().begin(["a", "b"], [4, 3]))
    some = model(ids, DenseKVCache().begin(["a", "b"], [4, 3]), torch.tensor([3, 6]))
    torch.testing.assert_close(some, everything[[3, 6]])


def test_layout_mismatch_is_refused() -> None:
    model = _model("kimi", 5)
    cache = DenseKVCache()
    stale = cache.begin(["a"], [1])
    with torch.no_grad():
        model(torch.tensor([1, 2, 3]), cache.begin(["a"], [3]))
        with pytest.raises(ValueError, match="3 tokens cached, the batch layout says 0"):
            model(torch.tensor([4]), stale)


def test_a_sequence_twice_in_one_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="appears twice"):
        DenseKVCache().begin(["a", "a"], [1, 1])


@pytest.mark.parametrize("arch", sorted(tiny.ALL))
@torch.no_grad()
def test_bfloat16_paths_stay_close_to_float32(arch: str) -> None:
    # Every expert active and dense attention: bf16 rounding must not flip a discrete choice
    # (expert or token selection), which would make any tolerance meaningless.
    model = _model(arch, 11, num_experts_per_tok=8, n_group=1, topk_group=1, index_topk=64)
    # bf16's error depends on the input: over 150 random inputs it was at most 0.045 (glm4),
    # 0.054 (glmdsa) and 0.063 (kimi), medians 0.020-0.027; the old bound of 0.05 failed a few
    # percent of kimi's. 0.1 keeps fresh random input while a wrong path (a lost cast, fp32
    # weights against bf16 activations) is far past it.
    bound = 0.1
    ids = torch.randint(0, model.config.vocab_size, (1, 9))
    ref = model.reference_forward(ids)
    model.to(torch.bfloat16)
    assert model.model.layers[1].mlp.gate.weight.dtype == torch.float32  # router stays fp32
    error = tiny.relative_error(model.reference_forward(ids), ref)
    assert error < bound, f"ids {ids.tolist()}: reference path error {error}"
    cached = model(ids[0], DenseKVCache().begin(["a"], [9]))
    assert cached.dtype == torch.bfloat16
    error = tiny.relative_error(cached, ref[0])
    assert error < bound, f"ids {ids.tolist()}: cached path error {error}"
