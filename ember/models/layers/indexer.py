"""The DeepSeek Sparse Attention indexer (GLM-5.x): which context tokens each query attends to.

``index_score(t, j) = sum_h w[t, h] * relu(q[t, h] . k[j] / sqrt(Di))`` with ``w`` from
``weights_proj`` scaled by ``1/sqrt(Hi)``; each query keeps its ``index_topk`` best causal
positions. The query reads the MLA query latent (``q_resid``); the key is one ``Di``-dim vector per
token (LayerNorm'd), whose first ``qk_rope_head_dim`` dims are rotated with interleaved pairs.
Selection is discrete, so no gradient flows through it (as in transformers).

Shapes: ``Hi`` indexer heads, ``Di`` indexer head dim, ``R`` rotary dims, ``K`` selected tokens.
"""

from __future__ import annotations

import torch
from torch import nn

from ember.models.attention import selection
from ember.models.attention.backend import AttentionBackend
from ember.models.config import ModelConfig
from ember.models.layers.rotary import apply_rotary


class Indexer(nn.Module):
    """``self_attn.indexer``: ``wq_b``, ``wk``, ``k_norm`` (LayerNorm) and ``weights_proj``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        assert config.indexer is not None and config.mla is not None
        assert config.mla.q_lora_rank is not None
        spec = config.indexer
        self.n_heads, self.head_dim = spec.index_n_heads, spec.index_head_dim
        self.rope_dim = config.mla.qk_rope_head_dim
        self.index_topk = spec.index_topk
        self.scale = self.head_dim**-0.5
        self.wq_b = nn.Linear(config.mla.q_lora_rank, self.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(config.hidden_size, self.head_dim, bias=False)
        self.k_norm = nn.LayerNorm(self.head_dim, eps=1e-6)
        self.weights_proj = nn.Linear(config.hidden_size, self.n_heads, bias=False)

    def project(
        self, x: torch.Tensor, q_resid: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x`` (..., hidden), ``q_resid`` (..., q_lora) -> q (..., Hi, Di), k (..., Di) and
        per-head weights w (..., Hi) in float32.

        The rotary part comes *first* in the indexer's head (MLA puts it last).
        """
        split = (self.rope_dim, self.head_dim - self.rope_dim)
        q = self.wq_b(q_resid).unflatten(-1, (self.n_heads, self.head_dim))
        q_rot, q_pass = q.split(split, dim=-1)
        q_rot = apply_rotary(q_rot, cos.unsqueeze(-2), sin.unsqueeze(-2), interleaved=True)
        k_rot, k_pass = self.k_norm(self.wk(x)).split(split, dim=-1)
        k_rot = apply_rotary(k_rot, cos, sin, interleaved=True)
        weights = self.weights_proj(x).float() * self.n_heads**-0.5
        return torch.cat((q_rot, q_pass), dim=-1), torch.cat((k_rot, k_pass), dim=-1), weights

    def index_scores(self, q: torch.Tensor, k: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Whole sequences: q (B, S, Hi, Di), k (B, T, Di), w (B, S, Hi) -> index scores
        (B, S, T) in float32, differentiable (the training loss of the indexer uses it too).

        ``selection.index_scores``, the arithmetic the engine's backends run too, in float32.
        """
        return selection.index_scores(q.float(), k.float(), weights, self.scale)

    @torch.no_grad()
    def reference_topk(
        self, x: torch.Tensor, q_resid: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> torch.Tensor:
        """Whole sequences ``x`` (B, S, hidden) -> selected positions (B, S, min(topk, S)).

        Ties go to the earliest position (``selection``: the engine's rule). Rows with fewer than
        ``topk`` causal positions also list some future positions; the causal mask of the
        attention that consumes the selection excludes those anyway.
        """
        q, k, weights = self.project(x, q_resid, cos, sin)
        seq_len = x.shape[1]
        index = self.index_scores(q, k, weights)
        causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device).tril()
        index = index.masked_fill(~causal, float("-inf"))
        count = min(self.index_topk, seq_len)
        return selection.top_positions_reference(index, count, mark_masked=False)

    @torch.no_grad()
    def select(
        self,
        x: torch.Tensor,
        q_resid: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        backend: AttentionBackend,
        layer: int,
    ) -> torch.Tensor | None:
        """Flat batch ``x`` (T, hidden): cache the keys and let the backend pick (T, K) or None."""
        q, k, weights = self.project(x, q_resid, cos, sin)
        return backend.indexer_topk(layer, q, weights, k, self.scale, self.index_topk)
