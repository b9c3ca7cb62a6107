"""The engine's attention backend: paged KV (BF16, FP8 e4m3 or float32), batched over sequences.

Per step the model runner builds one ``PagedBatch`` (slot mapping, page tables, masks) and every
layer reuses it. Each layer call

1. writes the new tokens' entries into their slots (``slot_mapping``), quantizing for FP8, then
2. attends, per *group* of sequences: all single-token queries (decodes) form one group and all
   longer ones (prefill chunks) another. A group gathers its sequences' pages, whole, into a
   zero-padded ``(B, L, W)`` block (``L`` = pages x page size; padding reads the pool's zero page)
   and runs batched matmuls under a mask: one op sequence per layer for the whole batch, never a
   Python loop over sequences.

New tokens are attended from the cache, after storing, so a prompt gives identical results
whether it is prefilled in one chunk or many, and FP8 rounding is the same for old and new tokens.
FP8 pages are expanded through a 256-entry table (``fp8.dequantize_fp8_lut``); the static scales
are folded into the queries and outputs, never applied to the cache.

Shapes: ``B`` sequences in a group, ``Q`` padded query tokens per sequence, ``P`` pages per
sequence (padded), ``S`` page size, ``L = P * S``, ``T`` flat new tokens, ``W`` cached width.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ember.models.attention.backend import BatchLayout
from ember.models.kv.fp8 import dequantize_fp8_lut, fp8_lut
from ember.models.kv.pool import KVPool


class Workspace:
    """Reusable scratch memory for the big per-layer gathers.

    Fresh multi-megabyte tensors come from ``mmap`` and fault every page in on first touch; on
    two cores that costs more than the gather itself. Views into one growing buffer per (dtype,
    role) don't. Only scratch lives here: nothing handed back to the model aliases it.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple[torch.dtype, str], torch.Tensor] = {}
        self._luts: dict[torch.dtype, torch.Tensor] = {}

    def take(self, shape: tuple[int, ...], dtype: torch.dtype, role: str) -> torch.Tensor:
        numel = 1
        for n in shape:
            numel *= n
        key = (dtype, role)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.numel() < numel:
            buffer = torch.empty(max(numel, 1 << 16), dtype=dtype)
            self._buffers[key] = buffer
        return buffer[:numel].view(shape)

    def fp8_lut(self, dtype: torch.dtype) -> torch.Tensor:
        lut = self._luts.get(dtype)
        if lut is None:
            lut = self._luts[dtype] = fp8_lut(dtype)
        return lut


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
    _bias: dict[torch.dtype, torch.Tensor] = field(default_factory=dict)

    @property
    def max_context(self) -> int:
        return self.num_pages * self.page_size

    def slots(self) -> torch.Tensor:
        """``(B, L)`` pool slot of every padded position (for the integrity checks)."""
        offsets = torch.arange(self.page_size)
        slots = self.pages.view(self.num_seqs, self.num_pages, 1) * self.page_size + offsets
        return slots.view(self.num_seqs, self.max_context)

    def bias(self, dtype: torch.dtype) -> torch.Tensor:
        """Additive mask ``(B, Q, 1, L)``: 0 where allowed, -inf elsewhere."""
        found = self._bias.get(dtype)
        if found is None:
            shape = (self.num_seqs, self.max_query, 1, self.max_context)
            found = torch.zeros(shape, dtype=dtype)
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
    common = dict(members=members, num_seqs=num_seqs, num_pages=num_pages, page_size=page_size)
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

    @classmethod
    def build(
        cls,
        layout: BatchLayout,
        block_tables: list[list[int]],
        page_size: int,
        padding_page: int,
    ) -> PagedBatch:
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
        pages, offsets = slot_mapping // page_size, slot_mapping % page_size
        return cls(layout, slot_mapping, groups, pages, offsets)


class PagedAttentionBackend:
    """``AttentionBackend`` over a ``KVPool`` for one step (see ``backend.py`` for the contract)."""

    def __init__(self, pool: KVPool, batch: PagedBatch, workspace: Workspace | None = None):
        self.pool = pool
        self.batch = batch
        self.workspace = workspace or Workspace()

    @property
    def layout(self) -> BatchLayout:
        return self.batch.layout

    def _store(self, cache: torch.Tensor, new: torch.Tensor) -> None:
        """Write ``new`` ``(T, heads, width)`` into one layer's ``cache`` at the step's slots."""
        cache[self.batch.slot_pages, :, self.batch.slot_offsets] = new

    def _gather(
        self, cache: torch.Tensor, head: int, group: AttentionGroup, dtype: torch.dtype
    ) -> torch.Tensor:
        """``group``'s pages of one head of one layer as ``(B, L, W)`` in ``dtype`` (scratch)."""
        width = cache.shape[-1]
        page_rows = cache[:, head].reshape(cache.shape[0], -1)  # (pages, S*W), a view
        shape = (group.num_seqs, group.max_context, width)
        raw = self.workspace.take((group.pages.numel(), page_rows.shape[1]), cache.dtype, "raw")
        torch.index_select(page_rows, 0, group.pages, out=raw)
        if cache.dtype == dtype:
            return raw.view(shape)
        out = self.workspace.take(shape, dtype, "wide")
        if self.pool.is_fp8:
            index = self.workspace.take((raw.numel(),), torch.int32, "index")
            return dequantize_fp8_lut(raw.view(shape), self.workspace.fp8_lut(dtype), index, out)
        return out.copy_(raw.view(shape))

    def gqa(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
    ) -> torch.Tensor:
        pool = self.pool
        assert pool.k is not None and pool.v is not None, "a GQA layer needs a GQA pool"
        num_tokens, num_heads, head_dim = q.shape
        num_kv_heads, v_dim = v.shape[1], v.shape[2]
        group_size = num_heads // num_kv_heads
        k_cache, v_cache = pool.k[layer], pool.v[layer]
        self._store(k_cache, pool.encode(k, layer, 0))
        self._store(v_cache, pool.encode(v, layer, 1))
        q = q * (scale * pool.scales[layer][0])
        v_scale = pool.scales[layer][1]
        out = torch.empty(num_tokens, num_heads, v_dim, dtype=q.dtype)
        for group in self.batch.groups:
            b, nq, ctx = group.num_seqs, group.max_query, group.max_context
            queries = group.select(q).view(b, nq, num_kv_heads, group_size, head_dim)
            bias = group.bias(q.dtype)  # (B, Q, 1, L)
            mixed = torch.empty(b, nq, num_kv_heads, group_size, v_dim, dtype=q.dtype)
            for h in range(num_kv_heads):  # per KV head: contiguous (B, L, D) operands
                rows = queries[:, :, h].reshape(b, nq * group_size, head_dim)
                keys = self._gather(k_cache, h, group, q.dtype)
                scores = torch.bmm(rows, keys.transpose(1, 2)).view(b, nq, group_size, ctx)
                scores += bias
                probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
                values = self._gather(v_cache, h, group, q.dtype)
                mixed[:, :, h] = torch.bmm(probs.view(b, nq * group_size, ctx), values).view(
                    b, nq, group_size, v_dim
                )
            if v_scale != 1.0:
                mixed *= v_scale
            group.scatter(out, mixed.view(b, nq, num_heads, v_dim))
        return out

    def mla(
        self,
        layer: int,
        q_latent: torch.Tensor,
        q_rope: torch.Tensor,
        latent: torch.Tensor,
        k_rope: torch.Tensor,
        scale: float,
        topk: torch.Tensor | None = None,
    ) -> torch.Tensor:
        pool = self.pool
        assert pool.kv is not None, "an MLA layer needs an MLA pool"
        num_tokens, num_heads, rank = q_latent.shape
        latent_scale, rope_scale = pool.scales[layer][0], pool.scales[layer][1]
        new = torch.cat((pool.encode(latent, layer, 0), pool.encode(k_rope, layer, 1)), dim=-1)
        kv_cache = pool.kv[layer]
        self._store(kv_cache, new.unsqueeze(1))
        # Fold the softmax scale and the static FP8 scales into the query:
        # (q * s) . stored == q . (stored * s).
        query = torch.cat((q_latent * (scale * latent_scale), q_rope * (scale * rope_scale)), -1)
        out = torch.empty(num_tokens, num_heads, rank, dtype=q_latent.dtype)
        for group in self.batch.groups:
            b, nq, ctx = group.num_seqs, group.max_query, group.max_context
            cache = self._gather(kv_cache, 0, group, query.dtype)  # (B, L, C+R)
            rows = group.select(query).reshape(b, nq * num_heads, -1)
            scores = torch.bmm(rows, cache.transpose(1, 2)).view(b, nq, num_heads, ctx)
            scores += group.bias(scores.dtype)
            if topk is not None:
                picked = self._topk_allowed(group, topk).unsqueeze(2)
                scores.masked_fill_(~picked, float("-inf"))
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
            mixed = torch.bmm(probs.view(b, nq * num_heads, ctx), cache[..., :rank])
            if latent_scale != 1.0:
                mixed *= latent_scale
            group.scatter(out, mixed.view(b, nq, num_heads, rank))
        return out

    def _topk_allowed(self, group: AttentionGroup, topk: torch.Tensor) -> torch.Tensor:
        """``(B, Q, L)`` bool: the context positions each query's indexer selected."""
        picked = group.select(topk)  # (B, Q, K), -1 = unused
        ctx = group.max_context
        picked = torch.where(picked < 0, ctx, picked)
        allowed = torch.zeros(group.num_seqs, group.max_query, ctx + 1, dtype=torch.bool)
        allowed.scatter_(2, picked, True)
        return allowed[..., :ctx]

    def indexer_topk(
        self,
        layer: int,
        index_q: torch.Tensor,
        index_weights: torch.Tensor,
        index_k: torch.Tensor,
        scale: float,
        topk: int,
    ) -> torch.Tensor | None:
        pool = self.pool
        row = pool.index_row.get(layer)
        if pool.index_k is None or row is None:
            raise ValueError(
                f"layer {layer} has no indexer cache in this pool (KVSpec.index_layers)"
            )
        cache = pool.index_k[row]
        self._store(cache, pool.encode(index_k, layer, 2).unsqueeze(1))
        if max(self.layout.seq_lens) <= topk:
            return None  # every context fits: attention is dense
        num_tokens, num_heads, dim = index_q.shape
        query = index_q * pool.scales[layer][2] if pool.scales[layer][2] != 1.0 else index_q
        out = torch.full((num_tokens, topk), -1, dtype=torch.int64)
        for group in self.batch.groups:
            b, nq, ctx = group.num_seqs, group.max_query, group.max_context
            keys = self._gather(cache, 0, group, query.dtype)  # (B, L, Di)
            rows = group.select(query).reshape(b, nq * num_heads, dim)
            scores = torch.relu(torch.bmm(rows, keys.transpose(1, 2)) * scale)
            scores = scores.view(b, nq, num_heads, ctx).float()
            weights = group.select(index_weights).float().unsqueeze(-1)  # (B, Q, Hi, 1)
            total = (scores * weights).sum(dim=2).masked_fill(~group.allowed, float("-inf"))
            count = min(topk, ctx)
            values, picked = torch.topk(total, count, dim=-1)  # (B, Q, count)
            picked = picked.masked_fill(values == float("-inf"), -1)
            padded = torch.full((b, nq, topk), -1, dtype=torch.int64)
            padded[..., :count] = picked
            group.scatter(out, padded)
        return out
