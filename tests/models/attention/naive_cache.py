"""A naive AttentionBackend: Python lists per sequence, one token and one head at a time.

The slow reference for ``PagedAttentionBackend`` (style R13). Cached entries go through the
reference FP8 pair (``quantize_fp8`` / ``dequantize_fp8``) or a plain dtype round trip, so the
comparison isolates paging, batching, masking and scale folding.
"""

from __future__ import annotations

import torch

from ember.models.attention.backend import BatchLayout
from ember.models.kv.fp8 import FP8_DTYPES, dequantize_fp8, quantize_fp8

DTYPES = {"float32": torch.float32, "bf16": torch.bfloat16}


class NaiveCacheBackend:
    """``store[seq_key][layer][name]`` is a list of cached rows (float32, already rounded)."""

    def __init__(
        self,
        store: dict,
        seq_keys: list[str],
        layout: BatchLayout,
        dtype: str,
        scales: list[list[float]] | None = None,
    ) -> None:
        self.store = store
        self.seq_keys = seq_keys
        self._layout = layout
        self.dtype = dtype
        self.scales = scales

    @property
    def layout(self) -> BatchLayout:
        return self._layout

    def _round(self, x: torch.Tensor, layer: int, component: int) -> torch.Tensor:
        if self.dtype in FP8_DTYPES:
            scale = self.scales[layer][component] if self.scales else 1.0
            stored = quantize_fp8(x.float(), scale, FP8_DTYPES[self.dtype])
            return dequantize_fp8(stored, scale)
        return x.to(DTYPES[self.dtype]).float()

    def _cache(self, i: int, layer: int, name: str) -> list[torch.Tensor]:
        per_seq = self.store.setdefault(self.seq_keys[i], {})
        return per_seq.setdefault(layer, {}).setdefault(name, [])

    def _tokens(self):
        """(flat row, sequence index, position) for every new token."""
        row = 0
        lens = zip(self.layout.context_lens, self.layout.query_lens, strict=True)
        for i, (ctx, q) in enumerate(lens):
            for p in range(ctx, ctx + q):
                yield row, i, p
                row += 1

    def _append(self, layer: int, name: str, component: int, x: torch.Tensor) -> None:
        for row, i, p in self._tokens():
            cache = self._cache(i, layer, name)
            assert len(cache) == p, f"sequence {i} cache has {len(cache)} rows at position {p}"
            cache.append(self._round(x[row], layer, component))

    def gqa(self, layer, q, k, v, scale):
        self._append(layer, "k", 0, k)
        self._append(layer, "v", 1, v)
        num_heads, group = q.shape[1], q.shape[1] // k.shape[1]
        out = torch.zeros(q.shape[0], num_heads, v.shape[2])
        for row, i, p in self._tokens():
            keys = torch.stack(self._cache(i, layer, "k")[: p + 1])  # (p+1, Hkv, D)
            values = torch.stack(self._cache(i, layer, "v")[: p + 1])
            for h in range(num_heads):
                s = (keys[:, h // group] @ q[row, h].float()) * scale
                out[row, h] = s.softmax(0) @ values[:, h // group]
        return out.to(q.dtype)

    def mla(self, layer, q_latent, q_rope, latent, k_rope, scale, topk=None):
        self._append(layer, "latent", 0, latent)
        self._append(layer, "rope", 1, k_rope)
        out = torch.zeros(q_latent.shape)
        for row, i, p in self._tokens():
            lat = torch.stack(self._cache(i, layer, "latent")[: p + 1])
            rope = torch.stack(self._cache(i, layer, "rope")[: p + 1])
            keep = torch.ones(p + 1, dtype=torch.bool)
            if topk is not None:
                chosen = [j for j in topk[row].tolist() if j >= 0]
                keep = torch.zeros(p + 1, dtype=torch.bool)
                keep[chosen] = True
            for h in range(q_latent.shape[1]):
                s = (lat @ q_latent[row, h].float() + rope @ q_rope[row, h].float()) * scale
                s = s.masked_fill(~keep, float("-inf"))
                out[row, h] = s.softmax(0) @ lat
        return out.to(q_latent.dtype)

    def indexer_topk(self, layer, index_q, index_weights, index_k, scale, topk):
        self._append(layer, "index", 2, index_k)
        if max(self.layout.seq_lens) <= topk:
            return None
        out = torch.full((index_q.shape[0], topk), -1, dtype=torch.int64)
        for row, i, p in self._tokens():
            keys = torch.stack(self._cache(i, layer, "index")[: p + 1])  # (p+1, Di)
            score = torch.zeros(p + 1)
            for h in range(index_q.shape[1]):
                rel = torch.relu((keys @ index_q[row, h].float()) * scale)
                score += index_weights[row, h].float() * rel
            # The engine's tie rule: the highest score, then the earliest position.
            kept = sorted(range(p + 1), key=lambda j: (-score[j].item(), j))[:topk]
            out[row, : len(kept)] = torch.tensor(kept)
        return out
