"""The DSA indexer's tie rule: the highest score, then the earliest position, on every path.

Scores built from small integers are exact in float32, so the ties below are exact whatever the
kernels do; the rule is then checked against ``sorted`` in plain Python, through the paged
backend (alone, next to longer sequences, in chunks), the dense backend, the naive test backend
and the model's ``Indexer.reference_topk``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
import torch

from ember.models.arch import build_model
from ember.models.attention.backend import BatchLayout
from ember.models.attention.dense import DenseKVCache
from ember.models.attention.paged import PagedAttentionBackend, PagedBatch, Workspace
from ember.models.attention.selection import (
    _by_key,
    index_scores,
    top_positions,
    top_positions_reference,
)
from ember.models.config_parse import parse_config
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import KVSpec
from tests.models import tiny
from tests.models.attention.naive_cache import NaiveCacheBackend

PAGE, HEADS, DIM, TOPK, SCALE = 16, 2, 8, 40, 0.25
# Three kinds of key: every head's dot is 16, 8 or -8 (relu: 0), times SCALE.
KEYS = {"high": 2.0, "mid": 1.0, "zero": -1.0}
RELU = {"high": 4, "mid": 2, "zero": 0}


def _expected(classes: list[str], weights: tuple[int, int], position: int) -> list[int]:
    """The rule in plain Python for the query at ``position``: sorted positions it keeps."""

    def score(j: int) -> int:
        return sum(w * RELU[classes[j]] for w in weights)

    order = sorted(range(position + 1), key=lambda j: (-score(j), j))
    return sorted(order[:TOPK])


def test_top_positions_equals_the_stable_sort_and_the_rule() -> None:
    seed = random.randrange(2**31)
    gen = torch.Generator().manual_seed(seed)
    values = torch.tensor([2.5, 1.0, 0.0, -0.0, -1.0, float("-inf")])
    shapes = (((3, 7), 7), ((2, 5, 300), 128), ((1, 4096), 128), ((64, 1, 600), 40), ((9, 50), 3))
    for shape, count in shapes:
        scores = values[torch.randint(0, len(values), shape, generator=gen)]
        if shape[-1] == 50:  # few values tie at the cut: topk alone decides most rows
            scores = torch.randn(shape, generator=gen).relu()
        fast, slow = top_positions(scores, count), top_positions_reference(scores, count)
        assert torch.equal(fast.sort(-1).values, slow.sort(-1).values), f"seed {seed} {shape}"
        by_key = _by_key(scores, count)  # every row's path off the CPU
        assert torch.equal(by_key, slow), f"seed {seed} shape {shape}"
        rows = scores.reshape(-1, shape[-1]).tolist()
        for row, got in zip(rows, slow.reshape(-1, count).tolist(), strict=True):
            # -0.0 == 0.0 in Python too; -inf positions are reported as -1
            want = sorted(range(len(row)), key=lambda j: (-row[j], j))[:count]
            want = [j if row[j] != float("-inf") else -1 for j in want]
            assert got == want, f"seed {seed} shape {shape}"
        unmarked = top_positions_reference(scores, count, mark_masked=False)
        assert bool((unmarked >= 0).all()) and torch.equal(unmarked[slow >= 0], slow[slow >= 0])


def test_top_positions_names_what_it_cannot_select() -> None:
    with pytest.raises(ValueError, match="float32"):
        top_positions(torch.zeros(2, 5, dtype=torch.float64), 3)
    with pytest.raises(ValueError, match="cannot select 6 of 5"):
        top_positions(torch.zeros(2, 5), 6)


class _Sequence:
    """One sequence of integer-valued indexer keys, queries and weights (exact scores)."""

    def __init__(self, rng: random.Random, length: int) -> None:
        self.classes = [rng.choice(list(KEYS)) for _ in range(length)]
        self.weights = [(rng.randint(-3, 3), rng.randint(-3, 3)) for _ in range(length)]

    def tensors(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        keys = torch.tensor([KEYS[c] for c in self.classes[start:stop]]).unsqueeze(1)
        n = stop - start
        return (
            torch.ones(n, HEADS, DIM),
            torch.tensor(self.weights[start:stop], dtype=torch.float32),
            keys.expand(n, DIM).contiguous(),
        )


Factory = Callable[[list[str], BatchLayout], object]


def _paged() -> Factory:
    spec = KVSpec("mla", 1, "float32", kv_lora_rank=4, qk_rope_head_dim=4, index_head_dim=DIM)
    pool = KVPool(spec, num_pages=160, page_size=PAGE, integrity=False)
    free = [p for p in range(160) if p != pool.padding_page]
    random.Random(0).shuffle(free)  # non-contiguous pages
    tables: dict[str, list[int]] = {}
    workspace = Workspace()

    def make(names: list[str], layout: BatchLayout) -> object:
        for name, total in zip(names, layout.seq_lens, strict=True):
            table = tables.setdefault(name, [])
            while len(table) * PAGE < total:
                table.append(free.pop())
        batch = PagedBatch.build(layout, [tables[n] for n in names], PAGE, pool.padding_page)
        return PagedAttentionBackend(pool, batch, workspace)

    return make


def _dense() -> Factory:
    cache = DenseKVCache()
    return lambda names, layout: cache.begin(names, layout.query_lens)


def _naive() -> Factory:
    store: dict = {}
    return lambda names, layout: NaiveCacheBackend(store, names, layout, "float32")


def _run(make: Factory, seqs: dict[str, _Sequence], steps: list[list[tuple[str, int]]]):
    """Feed ``steps`` (each: (sequence, new tokens)); -> {(sequence, position): kept positions}."""
    done = dict.fromkeys(seqs, 0)
    kept: dict[tuple[str, int], list[int]] = {}
    for step in steps:
        names = [name for name, _ in step]
        layout = BatchLayout(tuple(n for _, n in step), tuple(done[name] for name in names))
        parts = [seqs[name].tensors(done[name], done[name] + n) for name, n in step]
        q, w, k = (torch.cat([p[i] for p in parts]) for i in range(3))
        picked = make(names, layout).indexer_topk(0, q, w, k, SCALE, TOPK)  # type: ignore[attr-defined]
        row = 0
        for name, n in step:
            for position in range(done[name], done[name] + n):
                if picked is None:  # every context fits: all causal positions
                    kept[name, position] = list(range(position + 1))
                else:
                    kept[name, position] = sorted(j for j in picked[row].tolist() if j >= 0)
                row += 1
            done[name] += n
    return kept


@pytest.mark.parametrize("backend", ["paged", "dense", "naive"])
def test_backends_break_exact_ties_at_the_earliest_position(backend: str) -> None:
    seed = random.randrange(2**31)
    rng = random.Random(seed)
    seqs = {name: _Sequence(rng, n) for name, n in (("a", 190), ("long", 300), ("short", 30))}
    alone = [[("a", 150)], [("a", 1)], [("a", 1)]]
    beside = [[("long", 290), ("a", 150), ("short", 20)]] + [
        [("long", 1), ("a", 1), ("short", 1)]
    ] * 2
    chunked = [[("a", 50), ("long", 100)], [("long", 100), ("a", 50)], [("a", 50)]]
    chunked += [[("a", 1), ("long", 1)]] * 2
    make = {"paged": _paged, "dense": _dense, "naive": _naive}[backend]
    for steps in (alone, beside, chunked):
        for (name, position), got in _run(make(), seqs, steps).items():
            seq = seqs[name]
            want = _expected(seq.classes, seq.weights[position], position)
            assert got == want, f"{backend} seed {seed}: {name} at {position}"


def test_reference_topk_breaks_exact_ties_at_the_earliest_position() -> None:
    """``k_norm`` with a zero weight makes every key its bias, and no rotation (cos 1, sin 0)
    keeps them equal: every position ties, and each query keeps the first ``index_topk``."""
    model = build_model(parse_config(tiny.glmdsa(index_topk=TOPK)))
    indexer = next(a.self_attn.indexer for a in model.model.layers if a.self_attn.indexer)
    with torch.no_grad():
        indexer.k_norm.weight.zero_()
        indexer.k_norm.bias.fill_(1.0)
    seq_len, rotary = 200, indexer.rope_dim // 2
    gen = torch.Generator().manual_seed(random.randrange(2**31))
    x = torch.randn(2, seq_len, indexer.wk.in_features, generator=gen)
    q_resid = torch.randn(2, seq_len, indexer.wq_b.in_features, generator=gen)
    cos, sin = torch.ones(2, seq_len, rotary), torch.zeros(2, seq_len, rotary)
    picked = indexer.reference_topk(x, q_resid, cos, sin)
    assert picked.shape == (2, seq_len, TOPK)
    for position in range(TOPK - 1, seq_len):  # rows before: future positions fill the rest
        for b in range(2):
            assert sorted(picked[b, position].tolist()) == list(range(TOPK)), (b, position)


@pytest.mark.parametrize("heads, dim", [(4, 64), (8, 16), (32, 128)])
def test_a_score_is_the_same_in_any_batch_shape(heads: int, dim: int) -> None:
    """One (query, key, weights) scored inside batches of other shapes: one value, bitwise (the
    summed-heads reduction and the matmul's column tail each gave 2-5 values before)."""
    seed = random.randrange(2**31)
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    q0, k0, w0 = (torch.randn(*s, generator=gen) for s in ((heads, dim), (dim,), (heads,)))
    seen = {}
    for _ in range(60):
        b, nq = rng.choice([1, 3, 16]), rng.choice([1, 1, 5, 33])
        length = rng.randint(1, rng.choice([20, 300]))  # short rows: where kernels differed
        q = torch.randn(b, nq, heads, dim, generator=gen)
        k, w = torch.randn(b, length, dim, generator=gen), torch.randn(b, nq, heads, generator=gen)
        i, t, j = rng.randrange(b), rng.randrange(nq), rng.randrange(length)
        q[i, t], k[i, j], w[i, t] = q0, k0, w0
        seen.setdefault(index_scores(q, k, w, dim**-0.5)[i, t, j].item(), (b, nq, length, j))
    assert len(seen) == 1, f"seed {seed}: {seen}"
