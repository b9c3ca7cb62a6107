"""PagedAttentionBackend against the naive per-token reference, on fresh random inputs (R13)."""

from __future__ import annotations

import random

import pytest
import torch

from ember.models.attention.backend import BatchLayout
from ember.models.attention.paged import PagedAttentionBackend, PagedBatch, Workspace
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import KVSpec
from tests.models.attention.naive_cache import NaiveCacheBackend

PAGE = 4


def _spec(kind: str, dtype: str) -> KVSpec:
    if kind == "gqa":  # value dim != key dim: the bmm path
        return KVSpec("gqa", 2, dtype, num_kv_heads=2, head_dim=8, v_head_dim=6)
    if kind == "gqa-sdpa":  # equal dims: PyTorch's fused attention
        return KVSpec("gqa", 2, dtype, num_kv_heads=2, head_dim=8, v_head_dim=8)
    return KVSpec(
        "mla",
        2,
        dtype,
        kv_lora_rank=12,
        qk_rope_head_dim=4,
        index_head_dim=8 if kind == "dsa" else 0,
    )


def _rounds(rng: random.Random, num_seqs: int, num_rounds: int):
    """Random mixed batches: each round some sequences decode, some prefill a chunk."""
    lengths = [0] * num_seqs
    for _ in range(num_rounds):
        members = rng.sample(range(num_seqs), rng.randint(1, num_seqs))
        query = [rng.choice([1, 1, rng.randint(2, 9)]) for _ in members]
        yield members, query, [lengths[m] for m in members]
        for m, q in zip(members, query, strict=True):
            lengths[m] += q


@pytest.mark.parametrize("kind", ["gqa", "gqa-sdpa", "mla", "dsa"])
@pytest.mark.parametrize("dtype", ["float32", "bf16", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("seed", [0, 1])
def test_paged_backend_matches_naive_reference(kind: str, dtype: str, seed: int) -> None:
    rng = random.Random(seed)
    torch.manual_seed(seed)
    spec = _spec(kind, dtype)
    pool = KVPool(spec, num_pages=64, page_size=PAGE, integrity=False)
    scales = None
    if dtype.startswith("fp8"):  # non-unit scales exercise the folding into queries and outputs
        scales = [[0.5, 0.02, 0.25], [2.0, 0.1, 1.0]][: spec.num_layers]
        scales = [row[: spec.num_components] for row in scales]
        pool.set_scales(scales)
    free = list(range(64))
    rng.shuffle(free)  # non-contiguous pages
    tables: dict[int, list[int]] = {i: [] for i in range(5)}
    store: dict = {}
    workspace = Workspace()
    for members, query, context in _rounds(rng, 5, 6):
        for m, q, c in zip(members, query, context, strict=True):
            while len(tables[m]) * PAGE < c + q:
                tables[m].append(free.pop())
        layout = BatchLayout(tuple(query), tuple(context))
        batch = PagedBatch.build(layout, [tables[m] for m in members], PAGE, pool.padding_page)
        fast = PagedAttentionBackend(pool, batch, workspace)
        slow = NaiveCacheBackend(store, [f"s{m}" for m in members], layout, dtype, scales)
        t = layout.num_tokens
        for layer in range(spec.num_layers):
            if kind.startswith("gqa"):
                q = torch.randn(t, 4, 8)
                k, v = torch.randn(t, 2, 8), torch.randn(t, 2, spec.v_head_dim) * 3
                got, want = fast.gqa(layer, q, k, v, 0.3), slow.gqa(layer, q, k, v, 0.3)
            else:
                args = (
                    torch.randn(t, 3, 12),
                    torch.randn(t, 3, 4),
                    torch.randn(t, 12),
                    torch.randn(t, 4) * 2,
                )
                topk_fast = topk_slow = None
                if kind == "dsa":
                    # Shifted so relu rarely zeroes a score: ties would make any top-k choice valid.
                    iq, ik = torch.randn(t, 2, 8) + 1.5, torch.randn(t, 8) + 1.5
                    iw = torch.rand(t, 2) + 0.5
                    topk_fast = fast.indexer_topk(layer, iq, iw, ik, 0.35, 5)
                    topk_slow = slow.indexer_topk(layer, iq, iw, ik, 0.35, 5)
                    assert (topk_fast is None) == (topk_slow is None)
                    if topk_fast is not None:
                        assert (
                            topk_fast.sort(-1).values.tolist() == topk_slow.sort(-1).values.tolist()
                        )
                got = fast.mla(layer, *args, 0.25, topk_fast)
                want = slow.mla(layer, *args, 0.25, topk_slow)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_stored_mla_cache_is_latent_and_rope_only() -> None:
    """MLA caches C + R elements per token per layer, never per-head keys (576 for Kimi K2)."""
    kimi = KVSpec("mla", 61, "bf16", kv_lora_rank=512, qk_rope_head_dim=64)
    assert kimi.elements_per_token == 576 * 61
    pool = KVPool(_spec("mla", "bf16"), num_pages=2, page_size=PAGE, integrity=False)
    assert pool.kv is not None and pool.kv.shape == (2, 1, 3, PAGE, 12 + 4)
    assert pool.k is None and pool.v is None and pool.index_k is None


def test_padding_page_stays_zero_and_absorbs_no_writes() -> None:
    spec = _spec("mla", "float32")
    pool = KVPool(spec, num_pages=4, page_size=PAGE, integrity=False)
    layout = BatchLayout((3, 1), (0, 5))
    batch = PagedBatch.build(layout, [[2], [0, 1]], PAGE, pool.padding_page)
    backend = PagedAttentionBackend(pool, batch)
    backend.mla(
        0, torch.randn(4, 3, 12), torch.randn(4, 3, 4), torch.randn(4, 12), torch.randn(4, 4), 0.3
    )
    assert pool.kv is not None
    assert torch.count_nonzero(pool.kv[:, :, pool.padding_page]) == 0
    assert batch.slot_mapping.tolist() == [8, 9, 10, 5]
