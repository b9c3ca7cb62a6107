"""How well a trained DSA indexer picks what dense attention would attend to.

For query positions that have more context than ``index_topk`` (where selection really restricts
attention), the *recall* is the share of the layer's dense attention mass (heads summed and
renormalised) that falls on the indexer's chosen positions. Two yardsticks on the same positions:
the most recent ``index_topk`` positions (a sliding window) and a uniform random choice (expected
share ``index_topk / (t + 1)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ember.models.arch import CausalLM
from ember.models.layers.mla import MLAttention
from ember.models.training.forward import _main_attention_probs


@dataclass(frozen=True, slots=True)
class IndexerRecall:
    layer: int
    indexer: float  # mean attention mass on the indexer's picks
    recent_window: float  # ... on the most recent index_topk positions
    random: float  # ... expected for a uniform random pick of index_topk positions
    queries: int

    def to_json(self) -> dict[str, float | int]:
        return {
            "layer": self.layer,
            "indexer": self.indexer,
            "recent_window": self.recent_window,
            "random": self.random,
            "queries": self.queries,
        }


@torch.no_grad()
def indexer_recall(model: CausalLM, windows: torch.Tensor) -> list[IndexerRecall]:
    """Recall per indexer layer over (B, S) token ``windows``, the model running as shipped."""
    model.eval()
    batch, seq_len = windows.shape
    positions = torch.arange(seq_len)
    cos, sin = model.rotary(positions.expand(batch, -1))
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril().expand(batch, -1, -1)
    x = model.model.embed_tokens(windows)
    topk: torch.Tensor | None = None
    out = []
    for i, layer in enumerate(model.model.layers):
        attn = layer.self_attn
        if isinstance(attn, MLAttention) and attn.indexer is not None:
            k = attn.indexer.index_topk
            h = layer.input_layernorm(x)
            dense, q_resid = _main_attention_probs(attn, h, cos, sin, causal)
            picks = attn.indexer.reference_topk(h, q_resid, cos, sin)
            chosen = torch.zeros_like(causal).scatter(-1, picks, True) & causal
            recent = causal & ~torch.ones(seq_len, seq_len, dtype=torch.bool).tril(-k)
            rows = positions >= k  # queries whose context exceeds index_topk
            if rows.any():
                mass = (dense * chosen).sum(-1)[:, rows]
                window = (dense * recent).sum(-1)[:, rows]
                random = (k / (positions[rows] + 1).float()).expand_as(mass)
                out.append(
                    IndexerRecall(
                        i,
                        float(mass.mean()),
                        float(window.mean()),
                        float(random.mean()),
                        int(mass.numel()),
                    )
                )
        x, topk = layer.reference(x, cos, sin, topk)
    return out
