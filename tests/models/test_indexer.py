"""The DSA indexer's batched score product against the literal formula of its docstring."""

from __future__ import annotations

import random

import torch

from ember.models.arch import build_model
from ember.models.config_parse import parse_config
from tests.models import tiny


def _literal_scores(
    q: torch.Tensor, k: torch.Tensor, w: torch.Tensor, scale: float
) -> torch.Tensor:
    """index(b, t, j) = sum_h w[b, t, h] * relu(q[b, t, h] . k[b, j] * scale), head by head."""
    out = torch.zeros(q.shape[0], q.shape[1], k.shape[1], dtype=torch.float64)
    for h in range(q.shape[2]):
        dots = torch.einsum("btd,bjd->btj", q[:, :, h].double(), k.double())
        out += w[:, :, h, None].double() * (dots * scale).relu()
    return out


def test_index_scores_match_the_literal_formula_and_its_gradient() -> None:
    seed = random.randrange(2**31)
    model = build_model(parse_config(tiny.glmdsa()))
    indexer = next(a.self_attn.indexer for a in model.model.layers if a.self_attn.indexer)
    gen = torch.Generator().manual_seed(seed)
    batch, seq, heads, dim = 3, 17, indexer.n_heads, indexer.head_dim
    q = torch.randn(batch, seq, heads, dim, generator=gen, requires_grad=True)
    k = torch.randn(batch, seq, dim, generator=gen, requires_grad=True)
    w = torch.randn(batch, seq, heads, generator=gen, requires_grad=True)
    fast = indexer.index_scores(q, k, w)
    slow = _literal_scores(q, k, w, indexer.scale)
    assert fast.shape == (batch, seq, seq) and fast.dtype == torch.float32
    assert torch.allclose(fast.double(), slow, rtol=1e-5, atol=1e-5), f"seed {seed}"
    probe = torch.randn(batch, seq, seq, generator=gen)
    fast_grads = torch.autograd.grad((fast * probe).sum(), (q, k, w))
    slow_grads = torch.autograd.grad((slow * probe.double()).sum(), (q, k, w))
    for f, s in zip(fast_grads, slow_grads, strict=True):
        assert torch.allclose(f, s.float(), rtol=1e-4, atol=1e-4), f"seed {seed}"
