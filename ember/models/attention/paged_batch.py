"""One step's paging metadata, shared by every layer: slot mapping, page tables, masks.

Built once per step by the model runner (``PagedBatch.build``) and read by the paged attention
backend. Sequences with a single new token form one *group* (decodes), those with more another
(prefill chunks); each group is padded to ``(B, Q)`` queries over ``(B, L)`` context positions,
``L`` = pages x page size, and padded positions read the pool's zero page.

Shapes: ``B`` sequences in a group, ``Q`` padded query tokens per sequence, ``P`` pages per
sequence (padded), ``S`` page size, ``L = P * S``, ``T`` flat new tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ember.models.attention.backend import BatchLayout


def stored_digests(
    steps: list[list[torch.Tensor]],
    num_tokens: int = 0,
    scratch: Callable[[tuple[int, ...], torch.dtype, str], torch.Tensor] | None = None,
) -> torch.Tensor:
    """``(sum T,)`` int64 content digests (``kv/integrity.py``: the wrap-around sum of a slot's
    words over every layer) of the tokens several steps stored, in step order, from the
    ``(T, heads, width)`` tensors each step's stores wrote (``PagedBatch.digest_words``; every
    row whole 64-bit words). ``num_tokens``: the count when ``steps`` is one step that stored
    nothing. ``scratch`` (``Workspace.take``): reusable memory for the stacked words."""
    steps = [stored for stored in steps if stored]
    if not steps:
        return torch.zeros(num_tokens, dtype=torch.int64)
    shapes = [(t.shape, t.dtype) for t in steps[0]]
    if all([(t.shape, t.dtype) for t in stored] == shapes for stored in steps[1:]):
        # Every step stored the same shapes (decode steps of a steady batch): one stack per
        # distinct shape over all steps and stores, and one sum (a flush of 8 glm4-tiny steps
        # is 2 ops where a cat per step and a sum of each were ~20).
        count = len(steps)
        total = None
        for shape in dict.fromkeys(shapes):
            picked = [
                t for stored in steps for t, s in zip(stored, shapes, strict=True) if s == shape
            ]
            if scratch is None:
                stacked = torch.stack(picked)
            else:
                # Into reused memory: a fresh stack of a few MB (many steps' stamps) faults in
                # every page: 2.1 against 1.0 ms for 64 glm4-tiny decode steps (isolated).
                stacked = scratch((len(picked), *shape[0]), shape[1], "digest")
                torch.stack(picked, out=stacked)
            words = stacked.view(count, len(picked) // count, shape[0][0], -1)
            sums = words.view(torch.int64).sum(dim=(1, 3))  # (steps, T); int64 adds wrap
            total = sums if total is None else total + sums
        assert total is not None
        return total.reshape(-1)
    rows = []
    for stored in steps:
        tokens = stored[0].shape[0]
        rows.append(torch.cat([t.reshape(tokens, -1).view(torch.uint8) for t in stored], 1))
    return torch.cat(rows, 0).view(torch.int64).sum(dim=1)


@dataclass(slots=True)
class DigestSums:
    """Where the store kernel sums one step's content digests: ``tokens`` int64 of ``buffer``
    from ``offset`` (the runner's, reused: a fresh array each step cost ~10 us, cold), written
    by the step's first store and added to by the others (``stores`` so far)."""

    buffer: np.ndarray  # int64
    offset: int
    tokens: int
    address: int  # of buffer[offset]
    stores: int = 0
    seconds: float = 0.0  # the time the sums took (the checker's share counts it)

    def values(self) -> np.ndarray:
        """``(tokens,)`` int64: the sums (valid once ``stores`` > 0)."""
        return self.buffer[self.offset : self.offset + self.tokens]


@dataclass(slots=True)
class PageSample:
    """Pages whose stored words the attention sums from its own page gathers, while hot.

    The integrity checker's content sample (``engine/integrity.py``) for one group: every
    ``step``-th page column from ``first`` (columns ``first, first + step, ...`` of every
    sequence's page table). Each gather of one layer of one cache adds to ``sums[b, j]`` the
    wrap-around int64 sum of the words of sequence ``b``'s page in column ``first + j * step`` in
    every head (the sidecar's page digest, restricted to that layer), and records the layer's
    ``data_ptr`` in ``covered`` so the checker re-reads from memory only the layers no gather
    read (the indexer cache of a step whose contexts all fit its top-k is never gathered).
    Columns, not pool pages, so that the sample is a strided view of the gather: summed in place
    with no copy (an index_select of the sampled rows then a sum: 16.7 against 10.5 us for one
    glm4-tiny gather at batch 64, isolated).
    """

    first: int
    step: int
    sums: torch.Tensor  # (B, n) int64, n = len(range(first, P, step))
    covered: set[int] = field(default_factory=set)
    cpu_seconds: float = 0.0  # process CPU time spent here (the checker's share counts it)

    def add(
        self,
        cache: torch.Tensor,
        raw: torch.Tensor,
        num_seqs: int,
        num_pages: int,
        heads_first: bool,
    ) -> None:
        """Sum the sampled pages of ``raw``, one layer's gather of ``cache`` ``(H, pages, S, W)``:
        ``(H * B * P, S * W)`` rows ordered ``(H, B, P)`` if ``heads_first`` else ``(B, H, P)``."""
        if raw.shape[1] * raw.element_size() % 8:
            return  # not whole 64-bit words: the checker reads this layer from memory
        heads = cache.shape[0]
        words = raw.view(torch.int64)
        if heads_first:
            picked = words.view(heads, num_seqs, num_pages, -1)[:, :, self.first :: self.step]
            self.sums += picked.sum(dim=(0, 3))  # wraps
        else:
            picked = words.view(num_seqs, heads, num_pages, -1)[:, :, self.first :: self.step]
            self.sums += picked.sum(dim=(1, 3))
        self.covered.add(cache.data_ptr())


@dataclass(slots=True)
class AttentionGroup:
    """Sequences attended together, padded to ``(B, Q)`` queries over ``(B, L)`` positions."""

    members: list[int]  # indices into the layout's sequences, in padded-row order
    num_seqs: int
    max_query: int
    num_pages: int  # P
    page_size: int
    pages: torch.Tensor  # (B * P,) pool page of each padded page position
    rows: slice | None  # contiguous flat rows when the group is a block of single tokens
    token_index: torch.Tensor | None  # (B, Q) flat row of each padded query (else ``rows``)
    valid_rows: torch.Tensor | None  # (n,) flat rows of the valid queries, in padded order
    valid: torch.Tensor | None  # (B, Q) bool: which padded queries are real
    allowed: torch.Tensor  # (B, Q, L) bool: causal and within the sequence
    seq_lens: torch.Tensor  # (B,) int64 tokens each sequence attends to (context + new)
    sample: PageSample | None = None  # pages to digest from this step's gathers (integrity)
    _bias: dict[torch.dtype, torch.Tensor] = field(default_factory=dict)
    _head_pages: dict[tuple[int, int, bool], torch.Tensor] = field(default_factory=dict)

    def head_pages(self, num_heads: int, pool_pages: int, heads_first: bool) -> torch.Tensor:
        """Rows of a ``(H * pool_pages, S * W)`` view holding every head's pages, ordered
        ``(H, B, P)`` when ``heads_first`` else ``(B, H, P)``."""
        key = (num_heads, pool_pages, heads_first)
        found = self._head_pages.get(key)
        if found is None:
            offsets = torch.arange(num_heads, dtype=torch.int64, device=self.pages.device)
            offsets *= pool_pages
            pages = self.pages.view(self.num_seqs, 1, self.num_pages)
            if heads_first:
                found = offsets.view(-1, 1, 1) + pages.view(1, self.num_seqs, self.num_pages)
            else:
                found = offsets.view(1, -1, 1) + pages
            found = self._head_pages[key] = found.reshape(-1)
        return found

    def to(self, device: torch.device) -> AttentionGroup:
        """This group's tables on ``device`` (built on the host, moved once per step)."""

        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device, non_blocking=True)

        return replace(
            self,
            pages=self.pages.to(device, non_blocking=True),
            token_index=move(self.token_index),
            valid_rows=move(self.valid_rows),
            valid=move(self.valid),
            allowed=self.allowed.to(device, non_blocking=True),
            seq_lens=self.seq_lens.to(device, non_blocking=True),
            _bias={},
            _head_pages={},
        )

    @property
    def max_context(self) -> int:
        return self.num_pages * self.page_size

    def slots(self) -> torch.Tensor:
        """``(B, L)`` pool slot of every padded position (for the integrity checks)."""
        offsets = torch.arange(self.page_size, device=self.pages.device)
        slots = self.pages.view(self.num_seqs, self.num_pages, 1) * self.page_size + offsets
        return slots.view(self.num_seqs, self.max_context)

    def bias(self, dtype: torch.dtype) -> torch.Tensor:
        """Additive mask ``(B, Q, 1, L)``: 0 where allowed, -inf elsewhere."""
        found = self._bias.get(dtype)
        if found is None:
            shape = (self.num_seqs, self.max_query, 1, self.max_context)
            found = torch.zeros(shape, dtype=dtype, device=self.allowed.device)
            found.masked_fill_(~self.allowed.unsqueeze(2), float("-inf"))
            self._bias[dtype] = found
        return found

    def select(self, x: torch.Tensor) -> torch.Tensor:
        """Flat ``(T, ...)`` rows -> padded ``(B, Q, ...)``."""
        if self.rows is not None:
            return x[self.rows].unsqueeze(1)
        assert self.token_index is not None
        return x[self.token_index]

    def scatter(self, out: torch.Tensor, padded: torch.Tensor) -> None:
        """Padded ``(B, Q, ...)`` results -> their flat rows of ``out``."""
        if self.rows is not None:
            out[self.rows] = padded.squeeze(1)
        else:
            assert self.valid is not None and self.valid_rows is not None
            out[self.valid_rows] = padded[self.valid]


def _build_group(
    members: list[int],
    layout: BatchLayout,
    starts: list[int],
    block_tables: list[list[int]],
    page_size: int,
    padding_page: int,
) -> AttentionGroup:
    q_lens = [layout.query_lens[i] for i in members]
    ctx_lens = [layout.context_lens[i] for i in members]
    seq_lens = [c + q for c, q in zip(ctx_lens, q_lens, strict=True)]
    num_seqs, max_query = len(members), max(q_lens)
    num_pages = -(-max(seq_lens) // page_size)
    table: list[int] = []
    for i, seq_len in zip(members, seq_lens, strict=True):
        used = -(-seq_len // page_size)
        table.extend(block_tables[i][:used])
        table.extend([padding_page] * (num_pages - used))
    pages = torch.tensor(table, dtype=torch.int64)
    key_pos = torch.arange(num_pages * page_size)
    seq_len_t = torch.tensor(seq_lens, dtype=torch.int64)
    firsts = [starts[i] for i in members]
    common = dict(
        members=members,
        num_seqs=num_seqs,
        num_pages=num_pages,
        page_size=page_size,
        seq_lens=seq_len_t,
    )
    if max_query == 1:
        allowed = (key_pos.unsqueeze(0) < seq_len_t.unsqueeze(1)).unsqueeze(1)  # (B, 1, L)
        contiguous = firsts == list(range(firsts[0], firsts[0] + num_seqs))
        index = torch.tensor(firsts, dtype=torch.int64)
        return AttentionGroup(
            **common,
            max_query=1,
            pages=pages,
            rows=slice(firsts[0], firsts[0] + num_seqs) if contiguous else None,
            token_index=None if contiguous else index.unsqueeze(1),
            valid_rows=None if contiguous else index,
            valid=None if contiguous else torch.ones(num_seqs, 1, dtype=torch.bool),
            allowed=allowed,
        )
    q_len_t = torch.tensor(q_lens, dtype=torch.int64)
    offsets = torch.arange(max_query)
    valid = offsets.unsqueeze(0) < q_len_t.unsqueeze(1)  # (B, Q)
    clamped = torch.minimum(offsets.unsqueeze(0), (q_len_t - 1).unsqueeze(1))
    positions = torch.tensor(ctx_lens, dtype=torch.int64).unsqueeze(1) + clamped  # (B, Q)
    token_index = torch.tensor(firsts, dtype=torch.int64).unsqueeze(1) + clamped
    return AttentionGroup(
        **common,
        max_query=max_query,
        pages=pages,
        rows=None,
        token_index=token_index,
        valid_rows=token_index[valid],
        valid=valid,
        allowed=key_pos.view(1, 1, -1) <= positions.unsqueeze(-1),  # (B, Q, L) causal
    )


@dataclass(slots=True)
class PagedBatch:
    """Everything a step's layers share: where new tokens go and what each group reads."""

    layout: BatchLayout
    slot_mapping: torch.Tensor  # (T,) pool slot of each new token
    groups: list[AttentionGroup]
    slot_pages: torch.Tensor  # (T,) slot_mapping // page_size
    slot_offsets: torch.Tensor  # (T,) slot_mapping % page_size
    # Integrity: when a list, each store appends the ``(T, heads, width)`` tensor it wrote (no
    # op of its own: a few view calls per store cost ~0.15 ms per batch-64 step) for the
    # checker's deferred content stamps (``ModelRunner._digests``); ``None`` after a store whose
    # rows are not whole 64-bit words (the runner then digests those slots from memory).
    digest_words: list[torch.Tensor] | None = None
    # When set (with ``digest_words``), a store made by the store kernel sums its tokens' words
    # as it stores (``kernels/stored_sums.py``) instead of appending to ``digest_words``.
    digest_sums: DigestSums | None = None

    def content_digests(self) -> torch.Tensor | None:
        """``(T,)`` int64 wrap-around sums of every word each new token stored (all layers), or
        ``None`` when a store's rows were not whole 64-bit words."""
        return content_digests(self.digest_words, self.digest_sums, self.slot_mapping.numel())

    @classmethod
    def build(
        cls,
        layout: BatchLayout,
        block_tables: list[list[int]],
        page_size: int,
        padding_page: int,
        device: torch.device | None = None,
    ) -> PagedBatch:
        """The step's tables, built on the host; moved to ``device`` (an accelerator's pool)
        when given and not the CPU."""
        starts: list[int] = []
        slot_list: list[int] = []
        total = 0
        for table, ctx, q in zip(block_tables, layout.context_lens, layout.query_lens, strict=True):
            starts.append(total)
            total += q
            if q == 1:
                slot_list.append(table[ctx // page_size] * page_size + ctx % page_size)
            else:
                slot_list.extend(
                    table[p // page_size] * page_size + p % page_size for p in range(ctx, ctx + q)
                )
        singles = [i for i, q in enumerate(layout.query_lens) if q == 1]
        chunks = [i for i, q in enumerate(layout.query_lens) if q > 1]
        groups = [
            _build_group(members, layout, starts, block_tables, page_size, padding_page)
            for members in (singles, chunks)
            if members
        ]
        slot_mapping = torch.tensor(slot_list, dtype=torch.int64)
        if device is not None and device.type != "cpu":
            slot_mapping = slot_mapping.to(device, non_blocking=True)
            groups = [group.to(device) for group in groups]
        pages, offsets = slot_mapping // page_size, slot_mapping % page_size
        return cls(layout, slot_mapping, groups, pages, offsets)


def content_digests(
    words: list[torch.Tensor] | None, summed: DigestSums | None, tokens: int
) -> torch.Tensor | None:
    """``PagedBatch.content_digests`` from a step's ``digest_words`` and ``digest_sums``."""
    if words is None:
        return None
    digests = stored_digests([words], tokens)
    if summed is not None and summed.stores:
        digests = digests + torch.from_numpy(summed.values().copy())  # int64 adds wrap
    return digests
