"""The native KV store (``kernels/stored_sums.py``) against its references, on fresh random input:
torch's ``index_put`` for the stored bytes, ``stored_digests`` (over the tensors the torch path
keeps) for the content sums; and, through the backend, a step of stores summed by the kernel
against the same step on the torch path."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from ember.models.attention.backend import BatchLayout
from ember.models.attention.paged import PagedAttentionBackend, PagedBatch, Workspace
from ember.models.attention.paged_batch import DigestSums, stored_digests
from ember.models.kernels import stored_sums
from ember.models.kv.fp8 import FP8_DTYPE

pytestmark = pytest.mark.kernels

PAGE = 4


def _kernel() -> stored_sums.StoreKernel:
    kernel = stored_sums.load()
    assert kernel is not None, "the test machine has a C compiler"
    return kernel


def _random(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random bits of ``dtype`` (any pattern, NaNs included: the store moves bytes)."""
    width = torch.empty(0, dtype=dtype).element_size()
    raw = torch.randint(0, 256, (*shape[:-1], shape[-1] * width), dtype=torch.uint8, generator=gen)
    return raw.view(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, FP8_DTYPE, torch.float8_e5m2, torch.float32])
@pytest.mark.parametrize("heads,width", [(2, 64), (1, 40), (3, 8), (1, 576)])
def test_store_and_sums_equal_index_put_and_stored_digests(dtype, heads, width) -> None:
    gen = torch.Generator().manual_seed(heads * 1000 + width)
    rng = random.Random(width)
    kernel = _kernel()
    pages = 12
    for trial in range(6):
        tokens = rng.randint(1, pages * PAGE)
        slots = torch.tensor(rng.sample(range(pages * PAGE), tokens), dtype=torch.int64)
        # A strided view into a wider projection, as the layers hand them over, at an odd
        # element offset (rows not 8-byte aligned) on some trials.
        extra = rng.randint(0, 3)
        joined = _random((tokens, heads + extra, width + trial % 2), dtype, gen)
        new = joined[:, extra:, trial % 2 :]
        cache = _random((heads, pages, PAGE, width), dtype, gen)
        expected = cache.clone()
        expected[:, slots // PAGE, slots % PAGE] = new.transpose(0, 1)
        assert kernel.fits(cache, new)
        whole = width * new.element_size() % 8 == 0
        # Garbage in the sums at first: the first store writes them, a second adds.
        sums = np.full(tokens, 12345, dtype=np.int64)
        address = sums.ctypes.data if whole else 0
        kernel.store(cache, new, slots, address)
        assert torch.equal(cache.view(torch.uint8), expected.view(torch.uint8))
        if whole:
            reference = stored_digests([[new]]).numpy()
            np.testing.assert_array_equal(sums, reference)
            kernel.store(cache, new, slots, address, add=True)
            np.testing.assert_array_equal(sums, stored_digests([[new, new]]).numpy())
            assert torch.equal(cache.view(torch.uint8), expected.view(torch.uint8))
        else:
            assert (sums == 12345).all()  # untouched without an address


def test_sums_need_whole_words() -> None:
    cache = torch.zeros(1, 2, PAGE, 3, dtype=torch.bfloat16)  # 6-byte rows
    new = torch.ones(2, 1, 3, dtype=torch.bfloat16)
    with pytest.raises(ValueError):
        _kernel().store(cache, new, torch.tensor([0, 5]), np.zeros(2, dtype=np.int64).ctypes.data)


class _Pool:
    """What ``_store`` reads from a pool: nothing but the caches it is handed."""


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_step_summed_by_the_store_kernel_equals_the_torch_path(dtype) -> None:
    """``PagedBatch.content_digests`` after the backend's stores: kernel sums against the
    torch path's kept tensors, and the caches written alike (a mix of store shapes)."""
    gen = torch.Generator().manual_seed(7)
    rng = random.Random(7)
    pages = 10
    layout = BatchLayout((1, 1, 5), (3, 8, 0))
    tables = [rng.sample(range(1, pages), 3) for _ in range(3)]
    shapes = [(2, 16), (2, 16), (1, 24), (1, 40)]
    news = [_random((7, h, w), dtype, gen) for h, w in shapes]
    results = []
    for kernels in (True, False):
        batch = PagedBatch.build(layout, tables, PAGE, 0)
        batch.digest_words = []
        workspace = Workspace(kernels=kernels)
        if kernels:
            assert workspace.store_kernel is not None
            buffer = np.full(20, -1, dtype=np.int64)  # a reused buffer, at an offset
            batch.digest_sums = DigestSums(buffer, 5, 7, buffer.ctypes.data + 8 * 5)
        backend = PagedAttentionBackend(_Pool(), batch, workspace)  # type: ignore[arg-type]
        caches = [torch.zeros(h, pages, PAGE, w, dtype=dtype) for h, w in shapes]
        for cache, new in zip(caches, news, strict=True):
            backend._store(cache, new)
        if kernels:
            assert batch.digest_words == []  # every store summed as it stored
            assert batch.digest_sums is not None and batch.digest_sums.stores == len(shapes)
            assert (buffer[:5] == -1).all() and (buffer[12:] == -1).all()  # only its run
        results.append((batch.content_digests(), caches))
    (fast, fast_caches), (slow, slow_caches) = results
    assert torch.equal(fast, slow)
    for a, b in zip(fast_caches, slow_caches, strict=True):
        assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))  # NaN bits too
