"""The engine's attention backend: paged KV (BF16, FP8 e4m3 or float32), batched over sequences.

Per step the model runner builds one ``PagedBatch`` (``paged_batch.py``: slot mapping, page
tables, masks) and every layer reuses it. Each layer call

1. writes the new tokens' entries into their slots (``slot_mapping``), quantizing for FP8, then
2. attends, per *group* of sequences: all single-token queries (decodes) form one group and all
   longer ones (prefill chunks) another. A group gathers its sequences' pages, whole, into a
   zero-padded ``(B, L, W)`` block (``L`` = pages x page size; padding reads the pool's zero page)
   and runs batched matmuls under a mask: one op sequence per layer for the whole batch, never a
   Python loop over sequences. The decode group instead goes, when the native kernel is built
   (``Workspace.decode_kernel``, ``kernels/paged_decode.py``), through one kernel call that walks
   the page table and reads each page once, in place (the gather then the matmuls read every byte
   twice; DSA's top-k selection and float16 queries keep the torch path, the kernel's reference).

New tokens are attended from the cache, after storing, so a prompt gives identical results
whether it is prefilled in one chunk or many, and FP8 rounding is the same for old and new tokens.
FP8 pages are expanded by moving bits (``fp8.dequantize_fp8_bits``: four vectorised passes and
no table); the static scales are folded into the queries and outputs, never applied to the cache.

Shapes: ``B`` sequences in a group, ``Q`` padded query tokens per sequence, ``P`` pages per
sequence (padded), ``S`` page size, ``L = P * S``, ``T`` flat new tokens, ``W`` cached width.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from ember.models.attention.backend import BatchLayout
from ember.models.attention.paged_batch import AttentionGroup, PagedBatch
from ember.models.attention.selection import index_scores, top_positions
from ember.models.kernels import paged_decode, stored_sums
from ember.models.kv.fp8 import dequantize_fp8_bits
from ember.models.kv.pool import KVPool

__all__ = ["PagedAttentionBackend", "PagedBatch", "Workspace"]


class Workspace:
    """What a runner's steps reuse: scratch memory for the big per-layer gathers, and the native
    decode kernel.

    Fresh multi-megabyte tensors come from ``mmap`` and fault every page in on first touch; on
    two cores that costs more than the gather itself. Views into one growing buffer per (dtype,
    role) don't. Only scratch lives here: nothing handed back to the model aliases it.

    ``decode_kernel`` (``kernels/paged_decode.py``) is loaded, or built on first use, here, once
    per runner; ``None`` when ``kernels`` is off or it cannot be built, and decodes then take the
    torch path (the reference). ``store_kernel`` (``kernels/stored_sums.py``) likewise for the
    stores, which it makes with the content digests summed (``None``: ``index_put`` and
    ``stored_digests``, the references).
    """

    def __init__(self, kernels: bool = True, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self._buffers: dict[tuple[torch.dtype, str], torch.Tensor] = {}
        # The native kernels read and write host memory: an accelerator's pool takes the torch
        # paths (the kernels' references), which run there as they are.
        native = kernels and self.device.type == "cpu"
        self.decode_kernel = paged_decode.load() if native else None
        self.store_kernel = stored_sums.load() if native else None

    def take(self, shape: tuple[int, ...], dtype: torch.dtype, role: str) -> torch.Tensor:
        numel = 1
        for n in shape:
            numel *= n
        key = (dtype, role)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.numel() < numel:
            buffer = torch.empty(max(numel, 1 << 16), dtype=dtype, device=self.device)
            self._buffers[key] = buffer
        return buffer[:numel].view(shape)


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
        batch = self.batch
        kernel = self.workspace.store_kernel
        if kernel is not None and kernel.fits(cache, new):
            summed = batch.digest_sums
            whole = (new.shape[-1] * new.element_size()) % 8 == 0
            if summed is not None and batch.digest_words is not None and whole:
                # Summed as stored, from the rows just read: no tensor kept for a later flush,
                # which found them cold (the sums' time is the checker's share).
                add = summed.stores > 0
                summed.seconds += kernel.store(cache, new, batch.slot_mapping, summed.address, add)
                summed.stores += 1
                return
            kernel.store(cache, new, batch.slot_mapping)
        else:
            cache[:, batch.slot_pages, batch.slot_offsets] = new.transpose(0, 1)
        if batch.digest_words is not None:
            if (new.shape[-1] * new.element_size()) % 8:
                batch.digest_words = None  # not whole words: the runner digests memory instead
            else:
                batch.digest_words.append(new)  # digested later, with other steps' (no op here)

    def _gather(
        self,
        cache: torch.Tensor,
        group: AttentionGroup,
        dtype: torch.dtype,
        role: str = "kv",
        heads_first: bool = True,
    ) -> torch.Tensor:
        """``group``'s pages of every head of one layer in ``dtype`` (scratch): ``(H, B, L, W)``
        when ``heads_first``, else ``(B, H, L, W)``.

        ``cache`` is one layer, ``(H, pages, S, W)``; one ``index_select`` copies whole pages.
        """
        heads, pool_pages, _, width = cache.shape
        page_rows = cache.view(heads * pool_pages, -1)  # (H * pages, S*W), contiguous
        if heads == 1:
            index = group.pages
        else:
            index = group.head_pages(heads, pool_pages, heads_first)
        b, ctx = group.num_seqs, group.max_context
        shape = (heads, b, ctx, width) if heads_first else (b, heads, ctx, width)
        raw = self.workspace.take((index.numel(), page_rows.shape[1]), cache.dtype, "raw" + role)
        torch.index_select(page_rows, 0, index, out=raw)
        if group.sample is not None:
            started = time.thread_time()
            group.sample.add(cache, raw, b, group.num_pages, heads_first)
            group.sample.cpu_seconds += time.thread_time() - started
        if cache.dtype == dtype:
            return raw.view(shape)
        out = self.workspace.take(shape, dtype, "wide" + role)
        if self.pool.is_fp8:
            return dequantize_fp8_bits(raw.view(shape), out)  # e4m3 or e5m2, from raw's dtype
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
        out = torch.empty(num_tokens, num_heads, v_dim, dtype=q.dtype, device=q.device)
        kernel = self.workspace.decode_kernel
        for group in self.batch.groups:
            b, nq, ctx = group.num_seqs, group.max_query, group.max_context
            if nq == 1 and kernel is not None and q.dtype in (torch.float32, torch.bfloat16):
                self._decode(kernel, group, q, k_cache, v_cache, v_dim, v_scale, out)
                continue
            if head_dim == v_dim and nq > 1:
                # PyTorch's fused CPU attention for prefill chunks, KV heads shared by their query
                # groups. Not for decodes: with one query per sequence its per-(sequence, head)
                # blocking costs ~7x the two batched matmuls below (5.5 vs 0.8 ms per layer at
                # batch 64 with glm4-tiny's shapes).
                keys = self._gather(k_cache, group, q.dtype, "k", heads_first=False)
                values = self._gather(v_cache, group, q.dtype, "v", heads_first=False)
                mixed = F.scaled_dot_product_attention(
                    group.select(q).transpose(1, 2),  # (B, H, Q, D)
                    keys,  # (B, Hkv, L, D)
                    values,
                    attn_mask=group.bias(q.dtype).transpose(1, 2),  # (B, 1, Q, L)
                    scale=1.0,  # already folded into q
                    enable_gqa=True,
                )  # (B, H, Q, Dv)
                if v_scale != 1.0:
                    mixed *= v_scale
                group.scatter(out, mixed.transpose(1, 2))
                continue
            # All KV heads in one batched matmul: batch = (KV head, sequence).
            queries = group.select(q).view(b, nq, num_kv_heads, group_size, head_dim)
            rows = queries.permute(2, 0, 1, 3, 4).reshape(num_kv_heads * b, nq * group_size, -1)
            keys = self._gather(k_cache, group, q.dtype, "k").view(num_kv_heads * b, ctx, -1)
            scores = torch.bmm(rows, keys.transpose(1, 2))  # (Hkv*B, Q*G, L)
            scores = scores.view(num_kv_heads, b, nq, group_size, ctx)
            scores += group.bias(q.dtype).unsqueeze(0)  # (1, B, Q, 1, L)
            # PyTorch's softmax computes reduced-precision inputs in float32 and rounds once:
            # the same probabilities as a float32 softmax then a cast, in one op.
            probs = torch.softmax(scores, dim=-1).to(q.dtype)
            values = self._gather(v_cache, group, q.dtype, "v").view(num_kv_heads * b, ctx, -1)
            mixed = torch.bmm(probs.view(num_kv_heads * b, nq * group_size, ctx), values)
            if v_scale != 1.0:
                mixed *= v_scale
            mixed = mixed.view(num_kv_heads, b, nq, group_size, v_dim).permute(1, 2, 0, 3, 4)
            if group.rows is not None:  # a block of single tokens: one copy into their rows
                out[group.rows].view(b, nq, num_kv_heads, group_size, v_dim).copy_(mixed)
            else:
                group.scatter(out, mixed.reshape(b, nq, num_heads, v_dim))
        return out

    def _decode(
        self,
        kernel: paged_decode.PagedDecodeKernel,
        group: AttentionGroup,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor | None,
        v_dim: int,
        out_scale: float,
        out: torch.Tensor,
    ) -> None:
        """One decode group through the native kernel: each page read once, in place, with no
        gather (the torch paths are its reference). GQA passes its K and V caches; MLA
        (``v_cache`` None) its one cache, whose rows' first ``v_dim`` elements are the values.
        On an integrity sample step the kernel also sums the sampled pages, as
        ``PageSample.add`` does from a gather, and reports the time the sums took, which the
        checker's share counts as it counts ``PageSample.add``'s."""
        if group.rows is not None:  # a block of single tokens: read and write their rows
            queries, target = q[group.rows], out[group.rows]
        else:
            queries = group.select(q)[:, 0]
            target = torch.empty(group.num_seqs, *out.shape[1:], dtype=out.dtype, device=out.device)
        if queries.stride(-1) != 1 or queries.stride(-2) != queries.shape[-1]:
            queries = queries.contiguous()  # the kernel reads each (H, D) row as one block
        caches = [k_cache] if v_cache is None else [k_cache, v_cache]
        sample = group.sample
        whole_words = all(c.shape[-2] * c.shape[-1] * c.element_size() % 8 == 0 for c in caches)
        sampled = (
            (sample.sums, sample.first, sample.step) if sample is not None and whole_words else ()
        )
        # Without a sample (or with pages of partial words) the checker reads memory itself.
        if v_cache is None:
            sum_seconds = kernel.mla(queries, k_cache, v_dim, group.pages, group.seq_lens,
                                     target, out_scale, *sampled)  # fmt: skip
        else:
            sum_seconds = kernel.gqa(queries, k_cache, v_cache, group.pages, group.seq_lens,
                                     target, out_scale, *sampled)  # fmt: skip
        if sampled:
            assert sample is not None
            sample.covered.update(c.data_ptr() for c in caches)
            sample.cpu_seconds += sum_seconds  # timed in the kernel: the checker's share
        if group.rows is None:
            group.scatter(out, target.unsqueeze(1))

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
        out = torch.empty(num_tokens, num_heads, rank, dtype=q_latent.dtype, device=q_latent.device)
        kernel = self.workspace.decode_kernel
        for group in self.batch.groups:
            b, nq, ctx = group.num_seqs, group.max_query, group.max_context
            if (
                nq == 1
                and topk is None  # DSA's selection: the masked torch path below
                and kernel is not None
                and query.dtype in (torch.float32, torch.bfloat16)
            ):
                self._decode(kernel, group, query, kv_cache, None, rank, latent_scale, out)
                continue
            cache = self._gather(kv_cache, group, query.dtype)[0]  # (B, L, C+R)
            rows = group.select(query).reshape(b, nq * num_heads, -1)
            scores = torch.bmm(rows, cache.transpose(1, 2)).view(b, nq, num_heads, ctx)
            scores += group.bias(scores.dtype)
            if topk is not None:
                picked = self._topk_allowed(group, topk).unsqueeze(2)
                scores.masked_fill_(~picked, float("-inf"))
            probs = torch.softmax(scores, dim=-1).to(query.dtype)  # float32 inside, as above
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
        shape = (group.num_seqs, group.max_query, ctx + 1)
        allowed = torch.zeros(shape, dtype=torch.bool, device=topk.device)
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
        num_tokens = index_q.shape[0]
        query = index_q * pool.scales[layer][2] if pool.scales[layer][2] != 1.0 else index_q
        out = torch.full((num_tokens, topk), -1, dtype=torch.int64, device=index_q.device)
        for group in self.batch.groups:
            b, nq, ctx = group.num_seqs, group.max_query, group.max_context
            keys = self._gather(cache, group, query.dtype)[0]  # (B, L, Di)
            # Each row's arithmetic and tie rule are the same whatever the group's padding
            # (``selection``): a sequence selects alike alone, batched or chunked.
            total = index_scores(group.select(query), keys, group.select(index_weights), scale)
            total = total.masked_fill(~group.allowed, float("-inf"))  # (B, Q, L)
            count = min(topk, ctx)
            picked = top_positions(total, count)  # (B, Q, count), -1 = masked
            padded = torch.full((b, nq, topk), -1, dtype=torch.int64, device=index_q.device)
            padded[..., :count] = picked
            group.scatter(out, padded)
        return out
