"""The reference ``AttentionBackend``: one contiguous float32 cache per sequence, naive math.

Slow on purpose and easy to check: every other backend (paged, FP8) is tested against this one,
and this one is tested against the models' cache-free ``reference_forward``.

Usage::

    cache = DenseKVCache()
    backend = cache.begin(["a", "b"], [5, 1])  # "a": 5 new tokens, "b": 1 (decode)
    logits = model(input_ids, backend)          # input_ids (6,), "a"'s tokens first

Shape letters as in ``backend.py``; ``Q`` new tokens of one sequence, ``N`` its total length.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence

import torch

from ember.models.attention.backend import BatchLayout
from ember.models.attention.selection import index_scores, top_positions_reference

_Entry = dict[str, torch.Tensor]  # "k"/"v" (GQA), "latent"/"k_rope" (MLA), "index_k" (DSA)


class DenseKVCache:
    """Per-sequence, per-layer float32 tensors; sequences are named by any hashable id."""

    def __init__(self) -> None:
        self._store: dict[Hashable, dict[int, _Entry]] = {}

    def context_len(self, seq_id: Hashable) -> int:
        """Tokens of ``seq_id`` already cached (0 for a sequence never seen)."""
        layers = self._store.get(seq_id)
        if not layers or 0 not in layers:
            return 0
        return next(iter(layers[0].values())).shape[0]

    def begin(
        self, seq_ids: Sequence[Hashable], query_lens: Sequence[int]
    ) -> DenseAttentionBackend:
        """A backend for one forward where ``seq_ids[i]`` brings ``query_lens[i]`` new tokens."""
        if len(set(seq_ids)) != len(seq_ids):
            raise ValueError(f"a sequence appears twice in one batch: {list(seq_ids)}")
        context_lens = tuple(self.context_len(seq) for seq in seq_ids)
        layout = BatchLayout(tuple(query_lens), context_lens)
        return DenseAttentionBackend(self, tuple(seq_ids), layout)

    def free(self, seq_id: Hashable) -> None:
        self._store.pop(seq_id, None)

    def append(
        self, seq_id: Hashable, layer: int, kind: str, new: torch.Tensor, context_len: int
    ) -> torch.Tensor:
        """Add ``new`` rows after exactly ``context_len`` cached rows; return all rows (float32)."""
        entry = self._store.setdefault(seq_id, {}).setdefault(layer, {})
        old = entry.get(kind)
        cached = 0 if old is None else old.shape[0]
        if cached != context_len:
            raise ValueError(
                f"sequence {seq_id!r} layer {layer} {kind}: {cached} tokens cached, "
                f"the batch layout says {context_len}"
            )
        new = new.detach().float()
        entry[kind] = new if old is None else torch.cat((old, new), dim=0)
        return entry[kind]


class DenseAttentionBackend:
    """Serves one forward pass over ``layout``; see ``AttentionBackend`` for the contract."""

    def __init__(self, cache: DenseKVCache, seq_ids: tuple[Hashable, ...], layout: BatchLayout):
        self._cache, self._seq_ids, self._layout = cache, seq_ids, layout

    @property
    def layout(self) -> BatchLayout:
        return self._layout

    def _spans(self) -> Iterator[tuple[Hashable, slice, int]]:
        """(sequence id, its rows in the flat batch, its context length) per sequence."""
        start = 0
        for seq, q_len, ctx in zip(
            self._seq_ids, self._layout.query_lens, self._layout.context_lens, strict=True
        ):
            yield seq, slice(start, start + q_len), ctx
            start += q_len

    @staticmethod
    def _causal(q_len: int, ctx: int, device: torch.device) -> torch.Tensor:
        """(Q, N) mask: new token t (position ctx + t) sees positions 0..ctx + t."""
        positions = torch.arange(ctx + q_len, device=device)
        return positions[None, :] <= (ctx + torch.arange(q_len, device=device))[:, None]

    def gqa(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
    ) -> torch.Tensor:
        heads, kv_heads = q.shape[1], k.shape[1]
        out = q.new_empty(q.shape[0], heads, v.shape[2])
        for seq, rows, ctx in self._spans():
            keys = self._cache.append(seq, layer, "k", k[rows], ctx)  # (N, Hkv, D)
            values = self._cache.append(seq, layer, "v", v[rows], ctx)  # (N, Hkv, Dv)
            keys = keys.repeat_interleave(heads // kv_heads, dim=1)  # (N, H, D)
            values = values.repeat_interleave(heads // kv_heads, dim=1)
            scores = torch.einsum("qhd,nhd->hqn", q[rows].float(), keys) * scale
            mask = self._causal(rows.stop - rows.start, ctx, q.device)
            probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            out[rows] = torch.einsum("hqn,nhd->qhd", probs, values).to(out.dtype)
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
        out = q_latent.new_empty(q_latent.shape)
        for seq, rows, ctx in self._spans():
            latents = self._cache.append(seq, layer, "latent", latent[rows], ctx)  # (N, C)
            rope_keys = self._cache.append(seq, layer, "k_rope", k_rope[rows], ctx)  # (N, R)
            scores = torch.einsum("qhc,nc->hqn", q_latent[rows].float(), latents)
            scores = (scores + torch.einsum("qhr,nr->hqn", q_rope[rows].float(), rope_keys)) * scale
            mask = self._causal(rows.stop - rows.start, ctx, q_latent.device)
            if topk is not None:
                mask = mask & _selected(topk[rows], latents.shape[0])
            probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            out[rows] = torch.einsum("hqn,nc->qhc", probs, latents).to(out.dtype)
        return out

    def indexer_topk(
        self,
        layer: int,
        index_q: torch.Tensor,
        index_weights: torch.Tensor,
        index_k: torch.Tensor,
        scale: float,
        topk: int,
    ) -> torch.Tensor | None:
        keys = [
            (rows, ctx, self._cache.append(seq, layer, "index_k", index_k[rows], ctx))
            for seq, rows, ctx in self._spans()
        ]
        if all(length <= topk for length in self._layout.seq_lens):
            return None  # every token sees at most topk positions: attention stays dense
        out = torch.full((index_q.shape[0], topk), -1, dtype=torch.long, device=index_q.device)
        for rows, ctx, cached in keys:
            # The engine's formula and tie rule (``selection``): (Q, Hi, Di) . (N, Di) -> (Q, N)
            index = index_scores(index_q[rows].float(), cached, index_weights[rows], scale)
            mask = self._causal(rows.stop - rows.start, ctx, index_q.device)
            index = index.masked_fill(~mask, float("-inf"))
            chosen = top_positions_reference(index, min(topk, cached.shape[0]))
            out[rows, : chosen.shape[1]] = chosen
        return out


def _selected(topk: torch.Tensor, length: int) -> torch.Tensor:
    """(Q, K) positions, -1 = unused -> (Q, N) boolean mask of the selected positions."""
    if topk.numel() and int(topk.max()) >= length:
        raise ValueError(f"top-k position {int(topk.max())} is past the sequence ({length} tokens)")
    slots = topk.masked_fill(topk < 0, length)  # unused slots land in an extra column
    mask = torch.zeros(topk.shape[0], length + 1, dtype=torch.bool, device=topk.device)
    return mask.scatter(1, slots, True)[:, :length]
