"""The sidecar's vectorised digest against its slow reference, and what it detects."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ember.models.kv.fp8 import (
    FP8_MAX,
    dequantize_fp8,
    dequantize_fp8_bits,
    fp8_max,
    quantize_fp8,
    scale_from_amax,
)
from ember.models.kv.integrity import CHAIN_SEED, chain_step, content_digest_reference
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import KVSpec


@pytest.mark.parametrize("dtype", ["float32", "bf16", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("index_dim", [0, 8, 3])  # 3: odd row widths fall back to narrow words
def test_vectorised_digest_matches_reference(dtype: str, index_dim: int) -> None:
    spec = KVSpec("mla", 3, dtype, kv_lora_rank=13, qk_rope_head_dim=4, index_head_dim=index_dim)
    pool = KVPool(spec, num_pages=4, page_size=4)
    torch.manual_seed(0)
    for cache in pool.caches:
        cache.copy_(torch.randn(cache.shape).to(cache.dtype))
    assert pool.sidecar is not None
    slots = np.array([0, 5, 6, 15, 19], dtype=np.int64)
    fast = pool.sidecar.content_digest(slots)
    for slot, digest in zip(slots, fast, strict=True):
        rows = [
            pool.slot_bytes(cache, row, int(slot))[head].numpy()
            for cache in pool.caches
            for row in range(cache.shape[0])
            for head in range(cache.shape[1])
        ]
        assert int(digest) == content_digest_reference(rows)


@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3"])
def test_every_single_bit_flip_changes_the_digest(dtype: str) -> None:
    spec = KVSpec("gqa", 2, dtype, num_kv_heads=2, head_dim=4, v_head_dim=4)
    pool = KVPool(spec, num_pages=1, page_size=2)
    for cache in pool.caches:
        cache.copy_(torch.randn(cache.shape).to(cache.dtype))
    assert pool.sidecar is not None
    slot = np.array([1])
    clean = pool.sidecar.content_digest(slot)[0]
    for cache in pool.caches:
        for layer in range(cache.shape[0]):
            raw = pool.slot_bytes(cache, layer, 1)
            for head in range(raw.shape[0]):
                for byte in range(raw.shape[1]):
                    for bit in range(8):
                        raw[head, byte] ^= 1 << bit
                        assert pool.sidecar.content_digest(slot)[0] != clean, (layer, byte, bit)
                        raw[head, byte] ^= 1 << bit
    assert pool.sidecar.content_digest(slot)[0] == clean
    # Another slot's bytes are not this slot's business.
    pool.slot_bytes(pool.caches[0], 0, 0)[0, 0] ^= 1
    assert pool.sidecar.content_digest(slot)[0] == clean


def test_chain_binds_tokens_positions_and_history() -> None:
    a = chain_step(chain_step(CHAIN_SEED, 1, 0), 2, 1)
    assert a == chain_step(chain_step(CHAIN_SEED, 1, 0), 2, 1)
    assert a != chain_step(chain_step(CHAIN_SEED, 3, 0), 2, 1)  # same token, other history
    assert a != chain_step(chain_step(CHAIN_SEED, 2, 0), 1, 1)  # swapped
    assert chain_step(CHAIN_SEED, 0, 0) != chain_step(CHAIN_SEED, 0, 1)


def test_fp8_round_trip_error_is_within_e4m3_precision() -> None:
    x = torch.randn(4096) * 3
    for scale in (1.0, 0.01, scale_from_amax(float(x.abs().max()))):
        back = dequantize_fp8(quantize_fp8(x, scale), scale)
        # e4m3 keeps 3 mantissa bits: relative error <= 2^-4 inside the normal range.
        normal = (x.abs() > 2**-6 * scale) & (x.abs() <= FP8_MAX * scale)
        rel = ((back - x).abs() / x.abs())[normal]
        assert float(rel.max()) <= 2**-4 + 1e-6
    assert float(dequantize_fp8(quantize_fp8(torch.tensor([1e6]), 1.0), 1.0)) == FP8_MAX


def test_e5m2_round_trip_keeps_two_mantissa_bits_and_saturates() -> None:
    """e5m2 (SGLang's other FP8 KV format): more range, 2 mantissa bits. PyTorch's cast
    overflows to inf there, so quantizing saturates by hand, as the e4m3 cast does."""
    e5m2 = torch.float8_e5m2
    x = torch.randn(4096) * 3
    top = fp8_max(e5m2)
    assert top == 57344.0
    for scale in (1.0, 0.01, scale_from_amax(float(x.abs().max()), dtype=e5m2)):
        back = dequantize_fp8(quantize_fp8(x, scale, e5m2), scale)
        normal = (x.abs() > 2**-14 * scale) & (x.abs() <= top * scale)
        rel = ((back - x).abs() / x.abs())[normal]
        assert float(rel.max()) <= 2**-3 + 1e-6
    huge = torch.tensor([1e6, -1e6, float("inf")], dtype=torch.bfloat16)
    assert dequantize_fp8(quantize_fp8(huge, 1.0, e5m2), 1.0).tolist() == [top, -top, top]


# The patterns the reference cast reads as inf or NaN (never stored: quantizing saturates).
NON_FINITE = {torch.float8_e4m3fn: 2, torch.float8_e5m2: 8}


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_bit_dequantization_equals_the_reference_cast(dtype: torch.dtype, fp8: torch.dtype) -> None:
    every_pattern = torch.arange(256, dtype=torch.int64).to(torch.uint8)
    fresh = torch.randn(4096, generator=torch.Generator().manual_seed(5)) * 40
    raw = torch.cat((every_pattern.view(fp8), quantize_fp8(fresh, 1.0, fp8))).view(-1, 16)
    out = torch.empty(raw.shape, dtype=dtype)
    fast = dequantize_fp8_bits(raw, out)
    want = dequantize_fp8(raw, 1.0, dtype)
    odd = ~torch.isfinite(want)
    assert int(odd.sum()) == NON_FINITE[fp8]  # e4m3fn: 0x7F, 0xFF; e5m2: +-inf and 6 NaNs
    assert torch.equal(fast[~odd], want[~odd])
    assert fast.data_ptr() == out.data_ptr(), "the output is the caller's scratch"
    # Subnormals (exponent 0) are where a flush-to-zero would show: m * 2^-9 (e4m3),
    # m * 2^-16 (e5m2).
    tiny = 2.0**-9 if fp8 == torch.float8_e4m3fn else 2.0**-16
    assert float(fast.view(-1)[1]) == tiny and float(fast.view(-1)[0x83]) == -3 * tiny


@pytest.mark.parametrize("spec_kind", ["gqa", "mla"])
def test_page_digest_equals_the_sum_of_its_slot_digests(spec_kind: str) -> None:
    if spec_kind == "gqa":
        spec = KVSpec("gqa", 2, "bf16", num_kv_heads=2, head_dim=8, v_head_dim=4)
    else:
        spec = KVSpec("mla", 3, "fp8_e4m3", kv_lora_rank=8, qk_rope_head_dim=4, index_head_dim=8)
    pool = KVPool(spec, num_pages=6, page_size=4)
    for cache in pool.caches:
        cache.copy_(torch.randn(cache.shape).to(cache.dtype))
    assert pool.sidecar is not None
    pages = np.array([5, 0, 3, 3], dtype=np.int64)
    slots = (pages[:, None] * 4 + np.arange(4)).reshape(-1)
    per_slot = pool.sidecar.content_digest(slots).reshape(4, 4).sum(axis=1, dtype=np.uint64)
    assert np.array_equal(pool.sidecar.page_digest(pages), per_slot)
    pool.sidecar.stamp_content(slots)
    assert np.array_equal(pool.sidecar.stamped_page_digest(pages), per_slot)


@pytest.mark.parametrize("kind", ["gqa", "mla", "dsa"])
@pytest.mark.parametrize("dtype", ["float32", "bf16", "fp8_e4m3"])
def test_digests_summed_while_storing_equal_the_digests_of_memory(kind: str, dtype: str) -> None:
    """The backend's on-the-fly stamp (fast path) against re-reading the pool (reference)."""
    from ember.models.attention.backend import BatchLayout
    from ember.models.attention.paged import PagedAttentionBackend, PagedBatch

    if kind == "gqa":
        spec = KVSpec("gqa", 2, dtype, num_kv_heads=2, head_dim=8, v_head_dim=8)
    else:
        index = 8 if kind == "dsa" else 0
        spec = KVSpec("mla", 2, dtype, kv_lora_rank=12, qk_rope_head_dim=4, index_head_dim=index)
    pool = KVPool(spec, num_pages=8, page_size=4)
    assert pool.sidecar is not None
    layout = BatchLayout((3, 1), (0, 6))
    batch = PagedBatch.build(layout, [[5], [2, 7]], 4, pool.padding_page)
    batch.digest_words = []
    backend = PagedAttentionBackend(pool, batch)
    for layer in range(2):
        if kind == "gqa":
            backend.gqa(
                layer, torch.randn(4, 4, 8), torch.randn(4, 2, 8), torch.randn(4, 2, 8), 0.3
            )
        else:
            if kind == "dsa":
                backend.indexer_topk(
                    layer, torch.randn(4, 2, 8), torch.rand(4, 2), torch.randn(4, 8), 0.3, 16
                )
            latent, rope = torch.randn(4, 12), torch.randn(4, 4)
            backend.mla(layer, torch.randn(4, 3, 12), torch.randn(4, 3, 4), latent, rope, 0.3)
    digests = batch.content_digests()
    assert digests is not None
    slots = batch.slot_mapping.numpy()
    assert np.array_equal(digests.numpy().view(np.uint64), pool.sidecar.content_digest(slots))
