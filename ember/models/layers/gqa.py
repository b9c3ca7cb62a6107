"""Grouped-query attention (GLM-4.5/4.6/4.7): q/k/v bias, per-head q/k RMSNorm, partial rotary.

Order inside the layer (as GLM and transformers do it): project, RMSNorm each head of q and k
(``use_qk_norm``), then rotate the first ``rope.dim`` dims of every head with half-split pairs and
pass the rest through.

Shapes: ``B`` batch, ``S`` sequence, ``T`` flat tokens, ``H`` query heads, ``Hkv`` KV heads,
``D`` head dim.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ember.models.attention.backend import AttentionBackend
from ember.models.config import ModelConfig
from ember.models.layers.fused import JoinedLinears
from ember.models.layers.norm import RMSNorm
from ember.models.layers.rotary import apply_rotary


class GQAttention(nn.Module):
    """``self_attn`` of a Glm4Moe layer: ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``, norms."""

    def __init__(self, config: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        gqa = config.gqa
        assert gqa is not None
        self.num_heads, self.num_kv_heads = config.num_attention_heads, gqa.num_key_value_heads
        self.head_dim, self.rope_dim = gqa.head_dim, config.rope.dim
        self.scale = gqa.head_dim**-0.5
        hidden, bias = config.hidden_size, config.attention_bias
        self.q_proj = nn.Linear(hidden, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=False)
        self.use_qk_norm = gqa.use_qk_norm
        if gqa.use_qk_norm:
            self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self._qkv = JoinedLinears()

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        rot, rest = x.split((self.rope_dim, self.head_dim - self.rope_dim), dim=-1)
        rot = apply_rotary(rot, cos.unsqueeze(-2), sin.unsqueeze(-2), interleaved=False)
        return torch.cat((rot, rest), dim=-1)

    def _project(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x`` (..., hidden) -> q (..., H, D), k (..., Hkv, D), v (..., Hkv, D)."""
        q = self.q_proj(x).unflatten(-1, (self.num_heads, self.head_dim))
        k = self.k_proj(x).unflatten(-1, (self.num_kv_heads, self.head_dim))
        v = self.v_proj(x).unflatten(-1, (self.num_kv_heads, self.head_dim))
        if self.use_qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin), v

    def _project_joined(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``_project`` (its slow reference) with fewer, bigger ops, for the cached forward:
        one matmul for q, k and v; q and k normed together and rotated together, in place.
        Each element sees the same float operations in the same order as in ``_project``."""
        joined = self._qkv.get(self.q_proj, self.k_proj, self.v_proj)
        if joined is None or (self.use_qk_norm and self.q_norm.weight.dtype != x.dtype):
            return self._project(x, cos, sin)  # (a norm weight of another dtype promotes)
        heads, kv_heads, dim, half = (
            self.num_heads,
            self.num_kv_heads,
            self.head_dim,
            self.rope_dim // 2,
        )
        qkv = F.linear(x, *joined).unflatten(-1, (heads + 2 * kv_heads, dim))
        qk, v = qkv.split((heads + kv_heads, kv_heads), dim=-2)
        if self.use_qk_norm:
            # RMSNorm.forward over q's and k's heads at once; the weights differ, so the final
            # (rounded) product is two in-place multiplies, as ``weight * normed`` rounds once.
            x32 = qk.float()
            x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.q_norm.eps)
            qk = x32.to(qk.dtype)
            qk[..., :heads, :].mul_(self.q_norm.weight)
            qk[..., heads:, :].mul_(self.k_norm.weight)
        else:
            qk = qk.contiguous()  # rotated in place below: never into the joined output's v
        # apply_rotary (half-split) on the first rope_dim dims of every head, written back.
        cos, sin = cos.to(qk.dtype).unsqueeze(-2), sin.to(qk.dtype).unsqueeze(-2)
        x1, x2 = qk[..., :half], qk[..., half : 2 * half]
        first = x1 * cos - x2 * sin
        second = x2 * cos + x1 * sin
        x1.copy_(first)
        x2.copy_(second)
        return qk[..., :heads, :], qk[..., heads:, :], v

    def reference(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, topk: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Whole sequences ``x`` (B, S, hidden) from position 0, causal, no cache."""
        seq_len = x.shape[1]
        q, k, v = self._project(x, cos, sin)
        group = self.num_heads // self.num_kv_heads  # query head h reads KV head h // group
        k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
        scores = torch.einsum("bshd,bthd->bhst", q, k) * self.scale
        causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        probs = scores.float().softmax(dim=-1).to(q.dtype)
        out = torch.einsum("bhst,bthd->bshd", probs, v).flatten(-2)
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
        """Flat batch ``x`` (T, hidden) -> (T, hidden); the backend caches k and v."""
        q, k, v = self._project_joined(x, cos, sin)
        out = backend.gqa(layer, q, k, v, self.scale)
        return self.o_proj(out.to(q.dtype).flatten(-2)), topk
