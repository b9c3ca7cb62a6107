"""The native paged decode kernel against the torch gather path (its reference), fresh random input.

Page tables are drawn at random with scattered pages and prefix pages shared between sequences;
lengths are ragged, including 1 and both sides of page boundaries; BF16, FP8 (non-unit static
scales) and float32 caches; several (KV heads, group, head dim, value dim) shapes.
"""

from __future__ import annotations

import ctypes
import random
from pathlib import Path

import pytest
import torch

from ember.models.attention.backend import BatchLayout
from ember.models.attention.paged import PagedAttentionBackend, PagedBatch, Workspace
from ember.models.attention.paged_batch import PageSample
from ember.models.kernels import build, paged_decode
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import KVSpec

pytestmark = pytest.mark.kernels

PAGE = 4
SHAPES = [  # (KV heads, query heads per KV head, head dim, value dim)
    (2, 2, 8, 8),
    (1, 4, 16, 8),
    (4, 1, 8, 12),
    (2, 3, 32, 32),
]


class _Counting:
    """Counts the kernel's calls, so that a test cannot pass on the torch path alone."""

    def __init__(self, kernel: paged_decode.PagedDecodeKernel) -> None:
        self.kernel, self.calls = kernel, 0

    def gqa(self, *args: object, **kwargs: object) -> float:
        self.calls += 1
        return self.kernel.gqa(*args, **kwargs)  # type: ignore[arg-type]

    def mla(self, *args: object, **kwargs: object) -> float:
        self.calls += 1
        return self.kernel.mla(*args, **kwargs)  # type: ignore[arg-type]


def _kernel_workspace() -> tuple[Workspace, _Counting]:
    workspace = Workspace()
    assert workspace.decode_kernel is not None, "the test machine has a C compiler"
    counting = _Counting(workspace.decode_kernel)
    workspace.decode_kernel = counting  # type: ignore[assignment]
    return workspace, counting


def _tables(
    rng: random.Random, context: list[int], free: list[int], share: bool
) -> list[list[int]]:
    """Each sequence's pages for ``context + 1`` tokens; with ``share``, some sequences start
    with another's full pages (a prefix-cache hit) before pages of their own."""
    tables: list[list[int]] = []
    for c in context:
        needed = c // PAGE + 1  # the page holding position c (the new token) included
        table: list[int] = []
        donors = [t for t in tables if len(t) > 1]
        if share and donors and rng.random() < 0.5:
            donor = rng.choice(donors)
            # Only pages full before position c: the new token's page is never shared.
            table = donor[: min(len(donor) - 1, c // PAGE)]
        table += [free.pop() for _ in range(needed - len(table))]
        tables.append(table)
    return tables


def _fill(pool: KVPool, gen: torch.Generator) -> None:
    for cache in pool.caches:
        values = torch.randn(cache.shape, generator=gen) * 2
        cache.copy_(values.to(cache.dtype))
        cache[:, :, pool.padding_page] = 0


def _lengths(rng: random.Random, num_seqs: int) -> list[int]:
    """Context lengths (tokens before the new one): 0, page boundaries, ragged."""
    edges = [0, PAGE - 1, PAGE, 2 * PAGE - 1, 2 * PAGE, 3 * PAGE + 1]
    return [
        rng.choice(edges) if rng.random() < 0.5 else rng.randint(0, 9 * PAGE)
        for _ in range(num_seqs)
    ]


def _close(got: torch.Tensor, want: torch.Tensor, exact: torch.Tensor) -> None:
    """The kernel's ``got`` against the torch path's ``want``, in the query dtype, and
    ``exact``, the torch path on the same values in float32.

    float32 queries: within float32 rounding of the torch path. bf16 queries: the torch path
    rounds its scores and probabilities to bf16 (and both paths the scaled query), so with
    scores of several units the two can differ by several percent; the kernel must be at least
    as close to the float32 result as the torch path is, within one bf16 rounding of it."""
    assert got.dtype == want.dtype
    if got.dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        return
    ours = (got.float() - exact).abs().max().item()
    theirs = (want.float() - exact).abs().max().item()
    assert ours <= theirs + 2**-8 * exact.abs().max().item(), (ours, theirs)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3", "fp8_e5m2", "float32"])
@pytest.mark.parametrize("query_dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("seed", [0, 1])
def test_kernel_matches_the_torch_gather_path(
    shape: tuple[int, int, int, int], dtype: str, query_dtype: torch.dtype, seed: int
) -> None:
    kv_heads, group, head_dim, v_dim = shape
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    spec = KVSpec("gqa", 2, dtype, num_kv_heads=kv_heads, head_dim=head_dim, v_head_dim=v_dim)
    pool = KVPool(spec, num_pages=200, page_size=PAGE, integrity=False)
    if dtype.startswith("fp8"):
        pool.set_scales([[0.05, 0.3], [2.0, 0.02]])
    _fill(pool, gen)
    free = list(range(200))
    rng.shuffle(free)
    num_seqs = rng.randint(1, 9)
    context = _lengths(rng, num_seqs)
    tables = _tables(rng, context, free, share=True)
    # Half the time a prefill chunk sits among the decodes: their rows are then not one block.
    query = [1] * num_seqs
    if num_seqs > 1 and seed % 2:
        query[rng.randrange(num_seqs)] = 3
        tables = [t + [free.pop()] for t in tables]  # room for the chunk's tokens
    layout = BatchLayout(tuple(query), tuple(context))
    fast_ws, counting = _kernel_workspace()
    slow_ws = Workspace(kernels=False)
    tokens, heads = layout.num_tokens, kv_heads * group
    for layer in range(2):
        q = torch.randn(tokens, heads, head_dim, generator=gen).to(query_dtype)
        k = torch.randn(tokens, kv_heads, head_dim, generator=gen).to(query_dtype)
        v = torch.randn(tokens, kv_heads, v_dim, generator=gen).to(query_dtype)
        got, want, exact = (
            PagedAttentionBackend(
                pool, PagedBatch.build(layout, tables, PAGE, pool.padding_page), workspace
            ).gqa(layer, *inputs, 0.35)
            for workspace, inputs in (
                (fast_ws, (q, k, v)),
                (slow_ws, (q, k, v)),
                (slow_ws, (q.float(), k.float(), v.float())),
            )
        )  # all three store the same new entries (bf16 -> float32 is exact)
        _close(got, want, exact)
    assert counting.calls == 2


@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3", "fp8_e5m2", "float32"])
def test_kernel_sums_the_integrity_sample_as_the_gathers_do(dtype: str) -> None:
    rng, gen = random.Random(7), torch.Generator().manual_seed(7)
    spec = KVSpec("gqa", 1, dtype, num_kv_heads=2, head_dim=8, v_head_dim=8)
    pool = KVPool(spec, num_pages=120, page_size=PAGE, integrity=False)
    _fill(pool, gen)
    free = list(range(120))
    rng.shuffle(free)
    context = _lengths(rng, 7) + [8 * PAGE]
    tables = _tables(rng, context, free, share=True)
    layout = BatchLayout((1,) * len(context), tuple(context))
    q, k, v = torch.randn(8, 4, 8), torch.randn(8, 2, 8), torch.randn(8, 2, 8)
    fast_ws, counting = _kernel_workspace()
    timed: list[float] = []
    for first, step in [(0, 1), (1, 3), (2, 8)]:
        found = []
        for workspace in (fast_ws, Workspace(kernels=False)):
            batch = PagedBatch.build(layout, tables, PAGE, pool.padding_page)
            group = batch.groups[0]
            width = len(range(first, group.num_pages, step))
            group.sample = PageSample(first, step, torch.zeros(8, width, dtype=torch.int64))
            PagedAttentionBackend(pool, batch, workspace).gqa(0, q, k, v, 0.3)
            found.append((group.sample.sums.tolist(), group.sample.covered))
            timed.append(group.sample.cpu_seconds)
        assert found[0] == found[1]
        assert any(any(row) for row in found[0][0])  # real pages were summed
        assert timed[-2] > 0.0  # the kernel's sums are timed: the checker's share counts them
    assert counting.calls == 3


MLA_SHAPES = [(4, 12, 4), (3, 64, 16), (1, 8, 8)]  # (heads, latent rank C, rotary dim R)


@pytest.mark.parametrize("shape", MLA_SHAPES)
@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3", "fp8_e5m2", "float32"])
@pytest.mark.parametrize("query_dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("seed", [0, 1])
def test_mla_kernel_matches_the_torch_gather_path(
    shape: tuple[int, int, int], dtype: str, query_dtype: torch.dtype, seed: int
) -> None:
    heads, rank, rope = shape
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    spec = KVSpec("mla", 2, dtype, kv_lora_rank=rank, qk_rope_head_dim=rope)
    pool = KVPool(spec, num_pages=200, page_size=PAGE, integrity=False)
    if dtype.startswith("fp8"):
        pool.set_scales([[0.05, 0.3], [2.0, 0.02]])
    _fill(pool, gen)
    free = list(range(200))
    rng.shuffle(free)
    num_seqs = rng.randint(1, 9)
    context = _lengths(rng, num_seqs)
    tables = _tables(rng, context, free, share=True)
    query = [1] * num_seqs
    if num_seqs > 1 and seed % 2:
        query[rng.randrange(num_seqs)] = 3
        tables = [t + [free.pop()] for t in tables]
    layout = BatchLayout(tuple(query), tuple(context))
    fast_ws, counting = _kernel_workspace()
    tokens = layout.num_tokens
    for layer in range(2):
        args = [
            torch.randn(tokens, heads, rank, generator=gen),
            torch.randn(tokens, heads, rope, generator=gen),
            torch.randn(tokens, rank, generator=gen),
            torch.randn(tokens, rope, generator=gen) * 2,
        ]
        args = [a.to(query_dtype) for a in args]
        slow_ws = Workspace(kernels=False)
        got, want, exact = (
            PagedAttentionBackend(
                pool, PagedBatch.build(layout, tables, PAGE, pool.padding_page), workspace
            ).mla(layer, *inputs, 0.3)
            for workspace, inputs in (
                (fast_ws, args),
                (slow_ws, args),
                (slow_ws, [a.float() for a in args]),
            )
        )
        _close(got, want, exact)
    assert counting.calls == 2


@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3", "fp8_e5m2"])
def test_mla_kernel_sums_the_integrity_sample_once_per_page(dtype: str) -> None:
    rng, gen = random.Random(3), torch.Generator().manual_seed(3)
    spec = KVSpec("mla", 1, dtype, kv_lora_rank=12, qk_rope_head_dim=4)
    pool = KVPool(spec, num_pages=120, page_size=PAGE, integrity=False)
    _fill(pool, gen)
    free = list(range(120))
    rng.shuffle(free)
    context = _lengths(rng, 6) + [7 * PAGE + 2]
    tables = _tables(rng, context, free, share=True)
    layout = BatchLayout((1,) * len(context), tuple(context))
    args = (torch.randn(7, 3, 12), torch.randn(7, 3, 4), torch.randn(7, 12), torch.randn(7, 4))
    fast_ws, counting = _kernel_workspace()
    for first, step in [(0, 1), (3, 2)]:
        found = []
        for workspace in (fast_ws, Workspace(kernels=False)):
            batch = PagedBatch.build(layout, tables, PAGE, pool.padding_page)
            group = batch.groups[0]
            width = len(range(first, group.num_pages, step))
            group.sample = PageSample(first, step, torch.zeros(7, width, dtype=torch.int64))
            PagedAttentionBackend(pool, batch, workspace).mla(0, *args, 0.3)
            found.append((group.sample.sums.tolist(), group.sample.covered))
        assert found[0] == found[1]
        assert any(any(row) for row in found[0][0])
    assert counting.calls == 2


def test_strided_queries_reach_the_kernel_as_rows() -> None:
    """A query whose heads are not laid out row by row (a transposed view: scaling it keeps its
    strides) is copied for the kernel, not refused."""
    spec = KVSpec("gqa", 1, "bf16", num_kv_heads=2, head_dim=8, v_head_dim=8)
    pool = KVPool(spec, num_pages=8, page_size=PAGE, integrity=False)
    _fill(pool, torch.Generator().manual_seed(2))
    layout = BatchLayout((1, 1, 1), (3, 5, 0))
    tables = [[0], [1, 2], [3]]
    q = torch.randn(4, 3, 8).transpose(0, 1)  # (T, H, D) with heads outermost in memory
    k, v = torch.randn(3, 2, 8), torch.randn(3, 2, 8)
    fast_ws, counting = _kernel_workspace()
    got, want = (
        PagedAttentionBackend(pool, PagedBatch.build(layout, tables, PAGE, 8), ws).gqa(
            0, q, k, v, 0.3
        )
        for ws in (fast_ws, Workspace(kernels=False))
    )
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert counting.calls == 1


def test_kernel_checks_its_arguments() -> None:
    kernel = paged_decode.load()
    assert kernel is not None
    k = torch.zeros(2, 5, PAGE, 8, dtype=torch.bfloat16)
    pages, lens = torch.zeros(3, dtype=torch.int64), torch.ones(3, dtype=torch.int64)
    out = torch.empty(3, 4, 8, dtype=torch.bfloat16)
    q = torch.zeros(3, 4, 8, dtype=torch.bfloat16)
    v = k.clone()
    with pytest.raises(TypeError):
        kernel.gqa(q.half(), k, v, pages, lens, out)
    with pytest.raises(ValueError):
        kernel.gqa(q, k.transpose(2, 3), v, pages, lens, out)
    with pytest.raises(ValueError):
        kernel.gqa(q, k, v, pages.int(), lens, out)
    with pytest.raises(ValueError):
        kernel.gqa(q, k, v, pages, lens, out[:2])
    with pytest.raises(ValueError):
        kernel.gqa(q, k, k, pages, lens, out)  # one cache for both: that is mla
    with pytest.raises(ValueError):
        kernel.mla(q, k, 9, pages, lens, out)  # values wider than the rows
    kernel.gqa(q, k, v, pages, lens, out)  # all-zero pages: uniform weights over zeros
    assert torch.count_nonzero(out) == 0
    v.fill_(1.0)
    kernel.gqa(q, k, v, pages, torch.tensor([1, 0, 2]), out)  # a length of 0: zeros, not NaN
    assert out[1].eq(0).all() and out[0].eq(1).all() and out[2].eq(1).all()


@pytest.mark.parametrize("dtype", ["bf16", "fp8_e4m3", "fp8_e5m2"])
def test_portable_build_agrees_with_the_native_one(dtype: str, tmp_path: Path) -> None:
    """The build without ``-march=native`` (the fallback for a compiler that refuses it) runs
    the same code on narrower vectors: equal within float32 reassociation. Where the native
    build has FMA and the portable one not (an AVX2-only CPU), fused products round differently
    as well: up to ~8e-6 absolute, 4e-5 relative on these sizes, hence the tolerance."""
    portable = build.build_with(paged_decode.SOURCE, build.PORTABLE_CFLAGS, tmp_path)
    kernels = [paged_decode.load(), paged_decode.PagedDecodeKernel(ctypes.CDLL(str(portable)))]
    assert kernels[0] is not None
    rng, gen = random.Random(5), torch.Generator().manual_seed(5)
    free = list(range(100))
    rng.shuffle(free)
    context = _lengths(rng, 6)
    tables = _tables(rng, context, free, share=True)
    gqa = KVPool(KVSpec("gqa", 1, dtype, num_kv_heads=2, head_dim=32, v_head_dim=16), 100, PAGE)
    mla = KVPool(KVSpec("mla", 1, dtype, kv_lora_rank=32, qk_rope_head_dim=8), 100, PAGE)
    for pool in (gqa, mla):
        _fill(pool, gen)
    batch = PagedBatch.build(BatchLayout((1,) * 6, tuple(context)), tables, PAGE, 100)
    group = batch.groups[0]
    q, q_mla = torch.randn(6, 4, 32, generator=gen), torch.randn(6, 4, 40, generator=gen)
    outs = []
    for kernel in kernels:
        assert kernel is not None
        out, out_mla = torch.empty(6, 4, 16), torch.empty(6, 4, 32)
        assert gqa.k is not None and gqa.v is not None and mla.kv is not None
        kernel.gqa(q, gqa.k[0], gqa.v[0], group.pages, group.seq_lens, out, 0.5)
        kernel.mla(q_mla, mla.kv[0], 32, group.pages, group.seq_lens, out_mla, 2.0)
        outs.append((out, out_mla))
    for native, other in zip(*outs, strict=True):
        torch.testing.assert_close(native, other, rtol=2e-4, atol=3e-5)
