"""The seam between model code and KV-cache storage.

A forward pass runs over a *flat batch*: the new tokens of several sequences concatenated along
one axis of length ``T``. Sequence ``i`` contributes ``query_lens[i]`` new tokens, at positions
``context_lens[i] .. context_lens[i] + query_lens[i] - 1``; its earlier ``context_lens[i]`` tokens
are already in the backend's cache. A prefill chunk and a decode step are the same thing with
different lengths, so one call serves mixed batches.

The architecture calls one backend method per attention layer with tensors for the new tokens
only (already projected, normed and rotated). The backend must

1. store exactly the cached quantities it is given (GQA: ``k`` and ``v``; MLA: the latent and the
   rotary key; DSA: the indexer key), in whatever layout and dtype it likes (paged, FP8...), and
2. attend causally: a new token at position ``p`` sees its own sequence's tokens ``0..p`` and
   nothing of any other sequence, and
3. return results in the dtype of the query it was given (computing in any precision).

Call order within one layer: ``gqa`` (GLM-4.x) or ``mla`` (Kimi, GLM-5.x). A GLM-5.x layer whose
``indexer_types`` entry is ``"full"`` first calls ``indexer_topk`` and passes its result to
``mla``; a ``"shared"`` layer calls only ``mla``, with the selection of the closest full layer
before it (no indexer keys are cached for shared layers). ``ember.models.attention.dense`` is the
reference implementation every other backend is compared with.

Shape letters: ``T`` new tokens in the batch, ``H`` query heads, ``Hkv`` KV heads, ``D`` head dim,
``Dv`` value head dim, ``C`` MLA latent rank (``kv_lora_rank``), ``R`` rotary dim
(``qk_rope_head_dim``), ``Hi``/``Di`` indexer heads/dim, ``K`` selected tokens per query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True, slots=True)
class BatchLayout:
    """Which sequence each new token belongs to, and how much context precedes it."""

    query_lens: tuple[int, ...]  # new tokens per sequence; sum == T
    context_lens: tuple[int, ...]  # tokens already cached per sequence before this forward

    def __post_init__(self) -> None:
        if len(self.query_lens) != len(self.context_lens):
            raise ValueError("query_lens and context_lens must have one entry per sequence")
        if any(n <= 0 for n in self.query_lens) or any(n < 0 for n in self.context_lens):
            raise ValueError("query_lens must be positive and context_lens non-negative")

    @property
    def num_seqs(self) -> int:
        return len(self.query_lens)

    @property
    def num_tokens(self) -> int:
        return sum(self.query_lens)

    @property
    def seq_lens(self) -> tuple[int, ...]:
        """Total tokens per sequence after this forward (context + new)."""
        return tuple(c + q for c, q in zip(self.context_lens, self.query_lens, strict=True))

    @property
    def is_decode(self) -> bool:
        """Every sequence contributes exactly one new token."""
        return all(q == 1 for q in self.query_lens)

    def positions(self) -> list[int]:
        """Position of every new token, in batch order (length T)."""
        out: list[int] = []
        for ctx, q in zip(self.context_lens, self.query_lens, strict=True):
            out.extend(range(ctx, ctx + q))
        return out


class AttentionBackend(Protocol):
    """Stores new cache entries and attends over each sequence's cached context.

    One backend object serves one forward pass (``layout``); the model calls it once per layer.
    """

    @property
    def layout(self) -> BatchLayout: ...

    def gqa(
        self,
        layer: int,
        q: torch.Tensor,  # (T, H, D), rotary already applied
        k: torch.Tensor,  # (T, Hkv, D), rotary already applied; cached
        v: torch.Tensor,  # (T, Hkv, Dv); cached
        scale: float,
    ) -> torch.Tensor:
        """Grouped-query attention (GLM-4.x). Returns ``(T, H, Dv)``."""
        ...

    def mla(
        self,
        layer: int,
        q_latent: torch.Tensor,  # (T, H, C): q_nope already absorbed through kv_b_proj's key half
        q_rope: torch.Tensor,  # (T, H, R), rotary applied
        latent: torch.Tensor,  # (T, C): kv_a_layernorm(compressed kv); cached
        k_rope: torch.Tensor,  # (T, R): shared rotary key, rotary applied; cached
        scale: float,
        topk: torch.Tensor | None = None,  # (T, K) selected context positions, -1 = unused slot
    ) -> torch.Tensor:
        """Absorbed multi-head latent attention (Kimi, GLM-5.x).

        ``score(t, j) = (q_latent[t] . latent[j] + q_rope[t] . k_rope[j]) * scale`` over the
        context positions ``j`` of token ``t``'s sequence (restricted to ``topk[t]`` when given);
        returns ``softmax(score) @ latent`` as ``(T, H, C)``; the model applies the value half of
        ``kv_b_proj`` and ``o_proj``.
        """
        ...

    def indexer_topk(
        self,
        layer: int,
        index_q: torch.Tensor,  # (T, Hi, Di), rotary applied
        index_weights: torch.Tensor,  # (T, Hi): per-head weights, already scaled
        index_k: torch.Tensor,  # (T, Di): indexer key for the new tokens; cached
        scale: float,
        topk: int,
    ) -> torch.Tensor | None:
        """DSA indexer (GLM-5.x): pick each token's ``topk`` context positions.

        ``index_score(t, j) = sum_h index_weights[t, h] * relu(index_q[t, h] . index_k[j] * scale)``
        over causal positions ``j``; returns ``(T, topk)`` int64 positions in any order (``-1``
        for unused slots, e.g. a token with fewer than ``topk`` causal positions), or ``None``
        when every sequence's total length is at most ``topk`` (attention is then dense). The new
        keys are cached either way.
        """
        ...
