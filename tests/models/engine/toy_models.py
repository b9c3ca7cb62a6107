"""Tiny transformers that use the AttentionBackend seam the way the real architectures do.

They stand in for Kimi / GLM-4.x / GLM-5.x until those land (and stay as fast unit-test models):
``kind="gqa"`` caches K and V; ``kind="mla"`` caches a latent and a shared rotary key and attends
in the absorbed form; ``kind="dsa"`` adds a DSA-style indexer that picks ``index_topk`` positions.
``reference_forward`` is a full recompute of one sequence with naive dense attention, written
independently of any backend: the oracle for the engine's tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from ember.models.attention.backend import AttentionBackend
from ember.models.kv.spec import KVSpec


@dataclass(frozen=True)
class ToyConfig:
    kind: Literal["gqa", "mla", "dsa"] = "gqa"
    vocab_size: int = 97
    hidden: int = 32
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2  # gqa
    head_dim: int = 8  # gqa q/k head dim and mla v head dim
    kv_lora_rank: int = 16  # mla
    rope_dim: int = 8  # mla rotary key dim
    index_heads: int = 8  # dsa (enough heads that relu rarely ties two positions at 0)
    index_dim: int = 8  # dsa
    index_topk: int = 6  # dsa: small so the sparse path runs


def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Neox-style RoPE over the last dim of ``x`` (T, ..., R) at ``positions`` (T,)."""
    half = x.shape[-1] // 2
    inv = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float32) / half))
    angles = positions.float()[:, None] * inv[None, :]  # (T, R/2)
    shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (half,)
    cos, sin = angles.cos().view(shape).to(x.dtype), angles.sin().view(shape).to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class ToyModel(nn.Module):
    def __init__(self, config: ToyConfig, seed: int = 0, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.config = config
        c = config
        gen = torch.Generator().manual_seed(seed)

        def w(*shape: int) -> nn.Parameter:
            return nn.Parameter(
                torch.randn(*shape, generator=gen, dtype=torch.float32) / math.sqrt(shape[-1])
            )

        self.embed = nn.Parameter(torch.randn(c.vocab_size, c.hidden, generator=gen))
        self.lm_head = w(c.vocab_size, c.hidden)
        self.layers = nn.ModuleList()
        for _ in range(c.num_layers):
            layer = nn.Module()
            if c.kind == "gqa":
                layer.wq = w(c.num_heads * c.head_dim, c.hidden)
                layer.wk = w(c.num_kv_heads * c.head_dim, c.hidden)
                layer.wv = w(c.num_kv_heads * c.head_dim, c.hidden)
                layer.wo = w(c.hidden, c.num_heads * c.head_dim)
            else:
                layer.wq_latent = w(c.num_heads * c.kv_lora_rank, c.hidden)
                layer.wq_rope = w(c.num_heads * c.rope_dim, c.hidden)
                layer.wkv = w(c.kv_lora_rank, c.hidden)
                layer.wk_rope = w(c.rope_dim, c.hidden)
                layer.w_uv = w(c.num_heads, c.head_dim, c.kv_lora_rank)
                layer.wo = w(c.hidden, c.num_heads * c.head_dim)
                if c.kind == "dsa":
                    layer.wiq = w(c.index_heads * c.index_dim, c.hidden)
                    layer.wik = w(c.index_dim, c.hidden)
                    layer.wiw = w(c.index_heads, c.hidden)
            layer.w_up = w(2 * c.hidden, c.hidden)
            layer.w_down = w(c.hidden, 2 * c.hidden)
            self.layers.append(layer)
        self.to(dtype)

    def kv_layout(self) -> KVSpec:
        c = self.config
        if c.kind == "gqa":
            return KVSpec("gqa", c.num_layers, "float32", c.num_kv_heads, c.head_dim, c.head_dim)
        return KVSpec(
            "mla",
            c.num_layers,
            "float32",
            kv_lora_rank=c.kv_lora_rank,
            qk_rope_head_dim=c.rope_dim,
            index_head_dim=c.index_dim if c.kind == "dsa" else 0,
        )

    @staticmethod
    def _norm(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def _attention_inputs(self, layer: nn.Module, h: torch.Tensor, positions: torch.Tensor) -> dict:
        c, t = self.config, h.shape[0]
        if c.kind == "gqa":
            q = rotate((h @ layer.wq.T).view(t, c.num_heads, c.head_dim), positions)
            k = rotate((h @ layer.wk.T).view(t, c.num_kv_heads, c.head_dim), positions)
            v = (h @ layer.wv.T).view(t, c.num_kv_heads, c.head_dim)
            return {"q": q, "k": k, "v": v, "scale": c.head_dim**-0.5}
        inputs = {
            "q_latent": (h @ layer.wq_latent.T).view(t, c.num_heads, c.kv_lora_rank),
            "q_rope": rotate((h @ layer.wq_rope.T).view(t, c.num_heads, c.rope_dim), positions),
            "latent": self._norm(h @ layer.wkv.T),
            "k_rope": rotate(h @ layer.wk_rope.T, positions),
            "scale": (c.kv_lora_rank + c.rope_dim) ** -0.5,
        }
        if c.kind == "dsa":
            inputs["index_q"] = rotate(
                (h @ layer.wiq.T).view(t, c.index_heads, c.index_dim), positions
            )
            inputs["index_k"] = rotate(h @ layer.wik.T, positions)
            inputs["index_weights"] = (h @ layer.wiw.T) * c.index_heads**-0.5
        return inputs

    def _finish_layer(
        self, layer: nn.Module, x: torch.Tensor, attn_out: torch.Tensor
    ) -> torch.Tensor:
        c, t = self.config, x.shape[0]
        if c.kind != "gqa":  # (T, H, C) latent mix -> per-head values
            attn_out = torch.einsum("thc,hdc->thd", attn_out, layer.w_uv)
        x = x + attn_out.reshape(t, -1) @ layer.wo.T
        h = self._norm(x)
        return x + torch.relu(h @ layer.w_up.T) @ layer.w_down.T

    def forward(
        self,
        input_ids: torch.Tensor,
        attn: AttentionBackend,
        logits_indices: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The engine's entry point, shaped like ``ember.models.arch.base.CausalLM.forward``."""
        positions = torch.tensor(attn.layout.positions())
        x = self.embed[input_ids]
        for index, layer in enumerate(self.layers):
            a = self._attention_inputs(layer, self._norm(x), positions)
            if self.config.kind == "gqa":
                out = attn.gqa(index, a["q"], a["k"], a["v"], a["scale"])
            else:
                topk = None
                if self.config.kind == "dsa":
                    topk = attn.indexer_topk(
                        index,
                        a["index_q"],
                        a["index_weights"],
                        a["index_k"],
                        self.config.index_dim**-0.5,
                        self.config.index_topk,
                    )
                out = attn.mla(
                    index, a["q_latent"], a["q_rope"], a["latent"], a["k_rope"], a["scale"], topk
                )
            x = self._finish_layer(layer, x, out)
        if logits_indices is not None:
            x = x[logits_indices]
        return self.compute_logits(x)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._norm(hidden) @ self.lm_head.T

    @torch.inference_mode()
    def reference_forward(self, input_ids: list[int]) -> torch.Tensor:
        """Logits ``(S, V)`` for one whole sequence, naive dense causal attention, no cache."""
        c = self.config
        ids = torch.tensor(input_ids)
        positions = torch.arange(len(input_ids))
        x = self.embed[ids]
        n = len(input_ids)
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        for layer in self.layers:
            a = self._attention_inputs(layer, self._norm(x), positions)
            if c.kind == "gqa":
                k = a["k"].repeat_interleave(c.num_heads // c.num_kv_heads, dim=1)
                v = a["v"].repeat_interleave(c.num_heads // c.num_kv_heads, dim=1)
                s = torch.einsum("thd,jhd->htj", a["q"], k) * a["scale"]
                s = s.masked_fill(~causal, float("-inf")).softmax(-1)
                out = torch.einsum("htj,jhd->thd", s, v)
            else:
                allowed = causal
                if c.kind == "dsa" and n > c.index_topk:
                    rel = torch.relu(
                        torch.einsum("thd,jd->thj", a["index_q"], a["index_k"]) * c.index_dim**-0.5
                    )
                    score = (
                        (rel * a["index_weights"].unsqueeze(-1))
                        .sum(1)
                        .masked_fill(~causal, float("-inf"))
                    )
                    top = score.topk(min(c.index_topk, n), dim=-1)
                    picked = torch.zeros(n, n, dtype=torch.bool)
                    picked.scatter_(1, top.indices, top.values > float("-inf"))
                    allowed = causal & picked
                s = torch.einsum("thc,jc->htj", a["q_latent"], a["latent"])
                s = (s + torch.einsum("thr,jr->htj", a["q_rope"], a["k_rope"])) * a["scale"]
                s = s.masked_fill(~allowed, float("-inf")).softmax(-1)
                out = torch.einsum("htj,jc->thc", s, a["latent"])
            x = self._finish_layer(layer, x, out)
        return self.compute_logits(x)


def greedy_reference(model: ToyModel, prompt: list[int], max_tokens: int) -> list[int]:
    """Single-sequence full-recompute greedy decoding over ``reference_forward``."""
    tokens = list(prompt)
    for _ in range(max_tokens):
        tokens.append(int(model.reference_forward(tokens)[-1].argmax()))
    return tokens[len(prompt) :]
