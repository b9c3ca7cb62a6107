"""Multi-head latent attention (Kimi K2 = DeepSeek-V3, GLM-5.x), optionally with the DSA indexer.

Per token the layer caches only ``latent`` = kv_a_layernorm(compressed kv) (C dims) and one rotary
key ``k_rope`` (R dims) shared by all heads. ``kv_b_proj`` expands the latent into per-head
``k_nope`` (Dn) and ``v`` (Dv).

- ``reference`` expands keys and values for every position and attends naively (no cache).
- ``forward_cached`` *absorbs* ``kv_b_proj``: ``q_nope . (W_k latent) = (W_k^T q_nope) . latent``,
  so the backend attends in latent space and the value half ``W_v`` is applied afterwards.

Shapes: ``B`` batch, ``S`` sequence, ``T`` flat tokens, ``H`` heads, ``C`` kv_lora_rank,
``R`` qk_rope_head_dim, ``Dn`` qk_nope_head_dim, ``Dv`` v_head_dim.
"""

from __future__ import annotations

import torch
from torch import nn

from ember.models.attention.backend import AttentionBackend
from ember.models.config import ModelConfig
from ember.models.layers.indexer import Indexer
from ember.models.layers.norm import RMSNorm
from ember.models.layers.rotary import apply_rotary, softmax_mscale

# DeepSeek's q_a_layernorm / kv_a_layernorm use this eps whatever rms_norm_eps says.
_LORA_NORM_EPS = 1e-6


class MLAttention(nn.Module):
    """``self_attn`` of a DeepseekV3 / GlmMoeDsa layer, with the checkpoints' parameter names."""

    def __init__(self, config: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        mla = config.mla
        assert mla is not None
        self.num_heads = heads = config.num_attention_heads
        self.kv_lora_rank, self.rope_dim = mla.kv_lora_rank, mla.qk_rope_head_dim
        self.nope_dim, self.v_dim = mla.qk_nope_head_dim, mla.v_head_dim
        self.interleaved = config.rope.interleaved
        self.scale = mla.qk_head_dim**-0.5 * softmax_mscale(config.rope)
        hidden, bias = config.hidden_size, config.attention_bias
        self.q_lora_rank = mla.q_lora_rank
        if mla.q_lora_rank is None:
            self.q_proj = nn.Linear(hidden, heads * mla.qk_head_dim, bias=False)
        else:
            self.q_a_proj = nn.Linear(hidden, mla.q_lora_rank, bias=bias)
            self.q_a_layernorm = RMSNorm(mla.q_lora_rank, _LORA_NORM_EPS)
            self.q_b_proj = nn.Linear(mla.q_lora_rank, heads * mla.qk_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(
            hidden, mla.kv_lora_rank + mla.qk_rope_head_dim, bias=bias
        )
        self.kv_a_layernorm = RMSNorm(mla.kv_lora_rank, _LORA_NORM_EPS)
        self.kv_b_proj = nn.Linear(
            mla.kv_lora_rank, heads * (mla.qk_nope_head_dim + mla.v_head_dim), bias=False
        )
        self.o_proj = nn.Linear(heads * mla.v_head_dim, hidden, bias=bias)
        spec = config.indexer
        self.reuses_topk = spec is not None and spec.indexer_types[layer_idx] == "shared"
        self.indexer = Indexer(config) if spec is not None and not self.reuses_topk else None

    def _project(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """``x`` (..., hidden) -> q_nope (..., H, Dn), q_rope (..., H, R), latent (..., C),
        k_rope (..., R) and the query latent (..., q_lora) the indexer reads (or None)."""
        q_resid = None
        if self.q_lora_rank is None:
            q = self.q_proj(x)
        else:
            q_resid = self.q_a_layernorm(self.q_a_proj(x))
            q = self.q_b_proj(q_resid)
        q_nope, q_rope = q.unflatten(-1, (self.num_heads, -1)).split(
            (self.nope_dim, self.rope_dim), dim=-1
        )
        latent, k_rope = self.kv_a_proj_with_mqa(x).split((self.kv_lora_rank, self.rope_dim), -1)
        latent = self.kv_a_layernorm(latent)
        q_rope = apply_rotary(
            q_rope, cos.unsqueeze(-2), sin.unsqueeze(-2), interleaved=self.interleaved
        )
        k_rope = apply_rotary(k_rope, cos, sin, interleaved=self.interleaved)
        return q_nope, q_rope, latent, k_rope, q_resid

    def reference(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, topk: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Whole sequences ``x`` (B, S, hidden) from position 0 -> (output, this layer's top-k)."""
        batch, seq_len, _ = x.shape
        q_nope, q_rope, latent, k_rope, q_resid = self._project(x, cos, sin)
        kv = self.kv_b_proj(latent).unflatten(-1, (self.num_heads, -1))  # (B, S, H, Dn + Dv)
        k_nope, v = kv.split((self.nope_dim, self.v_dim), dim=-1)
        q = torch.cat((q_nope, q_rope), dim=-1)  # (B, S, H, Dn + R)
        k = torch.cat((k_nope, k_rope.unsqueeze(-2).expand(-1, -1, self.num_heads, -1)), dim=-1)
        scores = torch.einsum("bshd,bthd->bhst", q, k) * self.scale
        allowed = torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device).tril()
        allowed = allowed.expand(batch, 1, seq_len, seq_len)
        if self.indexer is not None:
            assert q_resid is not None
            topk = self.indexer.reference_topk(x, q_resid, cos, sin)
        if self.indexer is not None or self.reuses_topk:
            assert topk is not None, "a shared DSA layer needs an earlier full indexer layer"
            chosen = torch.zeros(batch, seq_len, seq_len, dtype=torch.bool, device=x.device)
            allowed = allowed & chosen.scatter(-1, topk, True).unsqueeze(1)
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = scores.float().softmax(dim=-1).to(q.dtype)
        out = torch.einsum("bhst,bthv->bshv", probs, v).flatten(-2)
        return self.o_proj(out), topk

    def forward_cached(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        backend: AttentionBackend,
        layer: int,
        topk: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Flat batch ``x`` (T, hidden) -> (output (T, hidden), this layer's top-k or None)."""
        q_nope, q_rope, latent, k_rope, q_resid = self._project(x, cos, sin)
        # kv_b_proj.weight: (H * (Dn + Dv), C) -> per head W_k (Dn, C) and W_v (Dv, C)
        w_kv = self.kv_b_proj.weight.unflatten(0, (self.num_heads, -1))
        w_k, w_v = w_kv.split((self.nope_dim, self.v_dim), dim=1)
        q_latent = torch.einsum("thn,hnc->thc", q_nope, w_k)
        if self.indexer is not None:
            assert q_resid is not None
            topk = self.indexer.select(x, q_resid, cos, sin, backend, layer)
        elif not self.reuses_topk:
            topk = None
        out_latent = backend.mla(layer, q_latent, q_rope, latent, k_rope, self.scale, topk)
        out = torch.einsum("thc,hvc->thv", out_latent.to(w_v.dtype), w_v).flatten(-2)
        return self.o_proj(out), topk
