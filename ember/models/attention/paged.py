"""The engine's attention backend: paged KV (BF16, FP8 e4m3 or float32), batched over sequences.

Per step the model runner builds one ``PagedBatch`` (slot mapping, gather indices, masks) and every
layer reuses it. Each layer call

1. writes the new tokens' entries into their slots (``slot_mapping``), quantizing for FP8, then
2. attends, per *group* of sequences: all single-token queries (decodes) form one group and all
   longer ones (prefill chunks) another. A group gathers its sequences' slots into a zero-padded
   ``(B, L, W)`` block (padding reads the pool's zero page) and runs two batched matmuls with a
   mask: one op sequence per layer for the whole batch, never a Python loop over sequences.

New tokens are attended from the cache, after storing, so a prompt gives identical results
whether it is prefilled in one chunk or many, and FP8 rounding is the same for old and new tokens.

Shapes: ``B`` sequences in a group, ``Q`` padded query tokens per sequence, ``L`` padded context
(the longest sequence in the group), ``T`` flat new tokens, ``W`` cached width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ember.models.attention.backend import BatchLayout
from ember.models.kv.pool import KVPool


class Workspace:
    """Reusable scratch memory for the big per-layer gathers.

    Fresh multi-megabyte tensors come from ``mmap`` and fault every page in on first touch; on
    two cores that cost more than the gather itself. Views into one growing buffer per dtype don't.
    Only scratch lives here: nothing handed back to the model aliases it.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple[torch.dtype, int], torch.Tensor] = {}

    def take(self, shape: tuple[int, ...], dtype: torch.dtype, slot: int = 0) -> torch.Tensor:
        numel = 1
        for n in shape:
            numel *= n
        key = (dtype, slot)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.numel() < numel:
            buffer = torch.empty(max(numel, 1 << 16), dtype=dtype)
            self._buffers[key] = buffer
        return buffer[:numel].view(shape)


@dataclass(slots=True)
class AttentionGroup:
    """Sequences attended together, padded to ``(B, Q)`` queries over ``(B, L)`` slots."""

    members: list[int]  # indices into the layout's sequences, in padded-row order
    num_seqs: int
    max_query: int
    max_context: int
    rows: slice | None  # contiguous flat rows when the group is a block of single tokens
    token_index: torch.Tensor | None  # (B, Q) flat row of each padded query (else ``rows``)
    valid_rows: torch.Tensor | None  # (n,) flat rows of the valid queries, in padded order
    valid: torch.Tensor | None  # (B, Q) bool: which padded queries are real
    slots: torch.Tensor  # (B * L,) pool slot of each padded context position
    allowed: torch.Tensor  # (B, Q, L) bool: causal and within the sequence
    _bias: dict[torch.dtype, torch.Tensor]

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
    num_seqs, max_query, max_context = len(members), max(q_lens), max(seq_lens)
    num_pages = -(-max_context // page_size)
    table = [
        block_tables[i][:num_pages]
        + [padding_page] * (num_pages - len(block_tables[i][:num_pages]))
        for i in members
    ]
    pages = torch.tensor(table, dtype=torch.int64)  # (B, P)
    slots = (pages.unsqueeze(-1) * page_size + torch.arange(page_size)).view(num_seqs, -1)
    slots = slots[:, :max_context].reshape(-1)  # (B*L,)
    seq_len_t = torch.tensor(seq_lens, dtype=torch.int64)
    key_pos = torch.arange(max_context)
    firsts = [starts[i] for i in members]
    if max_query == 1:
        allowed = (key_pos.unsqueeze(0) < seq_len_t.unsqueeze(1)).unsqueeze(1)  # (B, 1, L)
        contiguous = firsts == list(range(firsts[0], firsts[0] + num_seqs))
        rows = slice(firsts[0], firsts[0] + num_seqs) if contiguous else None
        token_index = None if contiguous else torch.tensor(firsts, dtype=torch.int64)[:, None]
        valid = None if contiguous else torch.ones(num_seqs, 1, dtype=torch.bool)
        valid_rows = None if contiguous else torch.tensor(firsts, dtype=torch.int64)
        return AttentionGroup(
            members,
            num_seqs,
            1,
            max_context,
            rows,
            token_index,
            valid_rows,
            valid,
            slots,
            allowed,
            {},
        )
    q_len_t = torch.tensor(q_lens, dtype=torch.int64)
    offsets = torch.arange(max_query)
    valid = offsets.unsqueeze(0) < q_len_t.unsqueeze(1)  # (B, Q)
    clamped = torch.minimum(offsets.unsqueeze(0), (q_len_t - 1).unsqueeze(1))
    positions = torch.tensor(ctx_lens, dtype=torch.int64).unsqueeze(1) + clamped  # (B, Q)
    token_index = torch.tensor(firsts, dtype=torch.int64).unsqueeze(1) + clamped
    allowed = key_pos.view(1, 1, -1) <= positions.unsqueeze(-1)  # (B, Q, L) causal
    return AttentionGroup(
        members,
        num_seqs,
        max_query,
        max_context,
        None,
        token_index,
        token_index[valid],
        valid,
        slots,
        allowed,
        {},
    )


@dataclass(slots=True)
class PagedBatch:
    """Everything a step's layers share: where new tokens go and what each group reads."""

    layout: BatchLayout
    slot_mapping: torch.Tensor  # (T,) pool slot of each new token
    groups: list[AttentionGroup]

    @classmethod
    def build(
        cls,
        layout: BatchLayout,
        block_tables: list[list[int]],
        page_size: int,
        padding_page: int,
    ) -> PagedBatch:
        starts: list[int] = []
        total = 0
        for q in layout.query_lens:
            starts.append(total)
            total += q
        slot_list: list[int] = []
        for table, ctx, q in zip(block_tables, layout.context_lens, layout.query_lens, strict=True):
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
        return cls(layout, torch.tensor(slot_list, dtype=torch.int64), groups)


class PagedAttentionBackend:
    """``AttentionBackend`` over a ``KVPool`` for one step (see ``backend.py`` for the contract)."""

    def __init__(self, pool: KVPool, batch: PagedBatch, workspace: Workspace | None = None):
        self.pool = pool
        self.batch = batch
        self.workspace = workspace or Workspace()

    @property
    def layout(self) -> BatchLayout:
        return self.batch.layout

    def _store(self, cache: torch.Tensor, rows: torch.Tensor) -> None:
        cache.index_put_((self.batch.slot_mapping,), rows)

    def _gather(
        self, cache: torch.Tensor, group: AttentionGroup, dtype: torch.dtype
    ) -> torch.Tensor:
        """Rows of ``group``'s context slots as ``(B, L, W)`` in ``dtype`` (scratch memory)."""
        width = cache.shape[-1]
        shape = (group.num_seqs, group.max_context, width)
        raw = self.workspace.take((group.slots.numel(), width), cache.dtype, slot=0)
        torch.index_select(cache, 0, group.slots, out=raw)
        if cache.dtype == dtype:
            return raw.view(shape)
        converted = self.workspace.take(shape, dtype, slot=1)
        return converted.copy_(raw.view(shape))

    def gqa(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
    ) -> torch.Tensor:
        pool = self.pool
        num_tokens, num_heads, head_dim = q.shape
        num_kv_heads, v_dim = v.shape[1], v.shape[2]
        group_size = num_heads // num_kv_heads
        k_scale, v_scale = pool.scales[layer][0], pool.scales[layer][1]
        new = torch.cat(
            (
                pool.encode(k.reshape(num_tokens, -1), layer, 0),
                pool.encode(v.reshape(num_tokens, -1), layer, 1),
            ),
            dim=-1,
        )
        self._store(pool.kv[layer], new)
        out = torch.empty(num_tokens, num_heads, v_dim, dtype=q.dtype)
        for group in self.batch.groups:
            b, nq, ctx = group.num_seqs, group.max_query, group.max_context
            cache = self._gather(pool.kv[layer], group, q.dtype)  # (B, L, Hkv*(D+Dv))
            keys = cache[..., : num_kv_heads * head_dim].view(b, ctx, num_kv_heads, head_dim)
            values = cache[..., num_kv_heads * head_dim :].view(b, ctx, num_kv_heads, v_dim)
            queries = group.select(q)  # (B, Q, H, D)
            queries = queries.view(b, nq, num_kv_heads, group_size, head_dim)
            queries = queries.permute(0, 2, 1, 3, 4).reshape(
                b, num_kv_heads, nq * group_size, head_dim
            )
            scores = torch.matmul(queries, keys.permute(0, 2, 3, 1))  # (B, Hkv, Q*G, L)
            scores = scores.view(b, num_kv_heads, nq, group_size, ctx) * (scale * k_scale)
            scores = scores + group.bias(scores.dtype).view(b, 1, nq, 1, ctx)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            probs = probs.view(b, num_kv_heads, nq * group_size, ctx)
            mixed = torch.matmul(probs, values.permute(0, 2, 1, 3))  # (B, Hkv, Q*G, Dv)
            if v_scale != 1.0:
                mixed = mixed * v_scale
            mixed = mixed.view(b, num_kv_heads, nq, group_size, v_dim).permute(0, 2, 1, 3, 4)
            group.scatter(out, mixed.reshape(b, nq, num_heads, v_dim))
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
        num_tokens, num_heads, rank = q_latent.shape
        latent_scale, rope_scale = pool.scales[layer][0], pool.scales[layer][1]
        new = torch.cat((pool.encode(latent, layer, 0), pool.encode(k_rope, layer, 1)), dim=-1)
        self._store(pool.kv[layer], new)
        # Fold the static scales into the query: (q * s) . stored == q . (stored * s).
        if latent_scale != 1.0:
            q_latent = q_latent * latent_scale
        if rope_scale != 1.0:
            q_rope = q_rope * rope_scale
        query = torch.cat((q_latent, q_rope), dim=-1)  # (T, H, C+R)
        out = torch.empty(num_tokens, num_heads, rank, dtype=q_latent.dtype)
        for group in self.batch.groups:
            b, nq, ctx = group.num_seqs, group.max_query, group.max_context
            cache = self._gather(pool.kv[layer], group, query.dtype)  # (B, L, C+R)
            rows = group.select(query).reshape(b, nq * num_heads, -1)
            scores = torch.bmm(rows, cache.transpose(1, 2)).view(b, nq, num_heads, ctx)
            scores = scores * scale + group.bias(scores.dtype)
            if topk is not None:
                scores = scores.masked_fill(
                    ~self._topk_allowed(group, topk).unsqueeze(2), float("-inf")
                )
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
            mixed = torch.bmm(probs.view(b, nq * num_heads, ctx), cache[..., :rank])
            if latent_scale != 1.0:
                mixed = mixed * latent_scale
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
        if pool.index_k is None:
            raise ValueError("this KV pool has no indexer cache (KVSpec.index_head_dim == 0)")
        self._store(pool.index_k[layer], pool.encode(index_k, layer, 2))
        if max(self.layout.seq_lens) <= topk:
            return None  # every context fits: attention is dense
        num_tokens, num_heads, dim = index_q.shape
        query = index_q * pool.scales[layer][2] if pool.scales[layer][2] != 1.0 else index_q
        out = torch.full((num_tokens, topk), -1, dtype=torch.int64)
        for group in self.batch.groups:
            b, nq, ctx = group.num_seqs, group.max_query, group.max_context
            keys = self._gather(pool.index_k[layer], group, query.dtype)  # (B, L, Di)
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
