"""The training forward pass: the model's own reference forward, plus what training needs on top.

* **Indexer loss (DSA).** The indexer's top-k selection is discrete, so the language-model loss
  never reaches it. As DeepSeek-V3.2 trains its indexer, each indexer layer gets a KL loss pulling
  its distribution ``softmax(index_score)`` towards the main attention's distribution (summed over
  heads, renormalised) over the positions the query may see: all causal positions in the dense
  warm-up, only the selected ones afterwards. The indexer reads a *detached* copy of the layer
  input, so this loss trains the indexer alone and the LM loss trains everything else.
* **Dense warm-up.** ``dense_attention=True`` lifts the indexer's ``index_topk`` to the window
  length for one forward, so attention is dense while the indexer learns what to pick.
* **Expert load.** ``ExpertLoad`` counts the tokens each router sends to each expert, for the
  auxiliary-loss-free balancing of DeepSeek-V3 (a bias step towards the under-loaded experts).

``training_forward`` walks the layers the way ``CausalLM.reference_forward`` does (the tests hold
the two to identical logits); it needs each layer's input to compute the indexer loss.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ember.models.arch import CausalLM
from ember.models.layers.mla import MLAttention
from ember.models.layers.moe import TopkRouter


@dataclass(frozen=True, slots=True)
class ForwardOutput:
    logits: torch.Tensor  # (B, S, V)
    indexer_kl: torch.Tensor  # scalar; 0 for models without an indexer


def indexer_layers(model: CausalLM) -> list[MLAttention]:
    out = []
    for layer in model.model.layers:
        attn = layer.self_attn
        if isinstance(attn, MLAttention) and attn.indexer is not None:
            out.append(attn)
    return out


@contextlib.contextmanager
def dense_indexers(model: CausalLM, seq_len: int) -> Iterator[None]:
    """Make every indexer select all positions (dense attention) inside the block."""
    layers = indexer_layers(model)
    saved = [a.indexer.index_topk for a in layers]  # type: ignore[union-attr]
    try:
        for a in layers:
            a.indexer.index_topk = max(seq_len, a.indexer.index_topk)  # type: ignore[union-attr]
        yield
    finally:
        for a, k in zip(layers, saved, strict=True):
            a.indexer.index_topk = k  # type: ignore[union-attr]


def _main_attention_probs(
    attn: MLAttention, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, allowed: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Head-summed, renormalised attention (B, S, S) of the layer, and its query latent."""
    q_nope, q_rope, latent, k_rope, q_resid = attn._project(h, cos, sin)  # noqa: SLF001
    kv = attn.kv_b_proj(latent).unflatten(-1, (attn.num_heads, -1))
    k_nope = kv[..., : attn.nope_dim]
    q = torch.cat((q_nope, q_rope), dim=-1)
    k = torch.cat((k_nope, k_rope.unsqueeze(-2).expand(-1, -1, attn.num_heads, -1)), dim=-1)
    scores = torch.einsum("bshd,bthd->bhst", q, k) * attn.scale
    probs = scores.masked_fill(~allowed.unsqueeze(1), float("-inf")).softmax(dim=-1).sum(dim=1)
    return probs / probs.sum(dim=-1, keepdim=True), q_resid


def indexer_kl(
    attn: MLAttention, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dense: bool
) -> torch.Tensor:
    """KL(main attention || indexer distribution), mean over query positions."""
    indexer = attn.indexer
    assert indexer is not None
    seq_len = h.shape[1]
    allowed = torch.ones(seq_len, seq_len, dtype=torch.bool, device=h.device).tril()
    allowed = allowed.expand(h.shape[0], seq_len, seq_len)
    with torch.no_grad():
        if not dense:
            _, _, _, _, q_resid = attn._project(h, cos, sin)  # noqa: SLF001
            topk = indexer.reference_topk(h, q_resid, cos, sin)
            chosen = torch.zeros_like(allowed).scatter(-1, topk, True)
            allowed = allowed & chosen
        target, q_resid = _main_attention_probs(attn, h, cos, sin, allowed)
    q, k, weights = indexer.project(h, q_resid, cos, sin)
    index = indexer.index_scores(q, k, weights)  # (B, S, S)
    log_q = index.masked_fill(~allowed, float("-inf")).log_softmax(dim=-1)
    terms = torch.where(allowed, target * (target.clamp_min(1e-12).log() - log_q), 0.0)
    return terms.sum(dim=-1).mean()


def training_forward(
    model: CausalLM, input_ids: torch.Tensor, *, dense_attention: bool = False
) -> ForwardOutput:
    """Logits of ``input_ids`` (B, S) exactly as ``reference_forward``, plus the indexer loss."""
    seq_len = input_ids.shape[1]
    positions = torch.arange(seq_len, device=input_ids.device)
    cos, sin = model.rotary(positions.expand(input_ids.shape[0], -1))
    x = model.model.embed_tokens(input_ids)
    kl = torch.zeros((), device=input_ids.device)
    topk: torch.Tensor | None = None
    with dense_indexers(model, seq_len) if dense_attention else contextlib.nullcontext():
        for layer in model.model.layers:
            attn = layer.self_attn
            if isinstance(attn, MLAttention) and attn.indexer is not None:
                h = layer.input_layernorm(x).detach()
                kl = kl + indexer_kl(attn, h, cos, sin, dense_attention)
            x, topk = layer.reference(x, cos, sin, topk)
    logits = model.lm_head(model.model.norm(x))
    return ForwardOutput(logits=logits, indexer_kl=kl)


class ExpertLoad:
    """Counts router choices per expert (forward hooks) and applies DeepSeek-V3's bias update."""

    def __init__(self, model: CausalLM) -> None:
        self.routers = [m for m in model.modules() if isinstance(m, TopkRouter)]
        self.counts = [torch.zeros(r.moe.n_routed_experts) for r in self.routers]
        self._hooks = [r.register_forward_hook(self._hook(i)) for i, r in enumerate(self.routers)]

    def _hook(self, index: int):  # noqa: ANN202 - torch's hook signature
        def record(
            _module: object, _args: object, output: tuple[torch.Tensor, torch.Tensor]
        ) -> None:
            indices = output[1].detach().flatten()
            self.counts[index] += torch.bincount(indices, minlength=len(self.counts[index])).cpu()

        return record

    @torch.no_grad()
    def update_biases(self, rate: float) -> float:
        """Nudge each bias towards balance; returns the worst max/mean load ratio seen."""
        worst = 0.0
        for router, counts in zip(self.routers, self.counts, strict=True):
            mean = counts.mean()
            if mean > 0:
                router.e_score_correction_bias += rate * torch.sign(mean - counts)
                worst = max(worst, float(counts.max() / mean))
            counts.zero_()
        return worst

    def close(self) -> None:
        for h in self._hooks:
            h.remove()


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
