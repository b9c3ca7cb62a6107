"""Mixture of experts: DeepSeek's sigmoid router and one ``MLP`` module per routed expert.

Routing (shared by DeepSeek-V3 / Kimi K2 and GLM-4.x/5.x): ``s = sigmoid(x W^T)`` in float32;
experts are *chosen* by ``s + e_score_correction_bias`` restricted to the ``topk_group`` best
groups (a group scores the sum of its two best biased scores), but *weighted* by the unbiased
``s``, optionally renormalised over the chosen ``k``, times ``routed_scaling_factor``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ember.models.config import MoEConfig
from ember.models.layers.mlp import MLP
from ember.models.layers.moe_grouped import (
    StackedExperts,
    grouped_experts,
    projections,
    stack_experts,
)


class TopkRouter(nn.Module):
    """The ``mlp.gate`` of an MoE layer: ``weight`` (E, hidden) and ``e_score_correction_bias``.

    Not an ``nn.Linear`` on purpose: it stays float32 (``_apply`` refuses dtype casts) and is never
    swapped by weight quantization, because its scores make discrete expert choices.
    """

    def __init__(self, hidden_size: int, moe: MoEConfig) -> None:
        super().__init__()
        self.moe = moe
        experts = moe.n_routed_experts
        self.weight = nn.Parameter(torch.empty(experts, hidden_size, dtype=torch.float32))
        self.register_buffer("e_score_correction_bias", torch.zeros(experts, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x`` (N, hidden) -> routing weights (N, k) float32 and expert indices (N, k)."""
        moe = self.moe
        scores = F.linear(x.float(), self.weight.float()).sigmoid()
        choice = scores + self.e_score_correction_bias
        if moe.topk_group < moe.n_group:
            per_group = moe.n_routed_experts // moe.n_group
            grouped = choice.view(-1, moe.n_group, per_group)
            group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)  # (N, n_group)
            kept = group_scores.topk(moe.topk_group, dim=-1, sorted=False).indices
            group_mask = torch.zeros_like(group_scores).scatter_(1, kept, 1.0).bool()
            expert_mask = group_mask.unsqueeze(-1).expand(-1, -1, per_group).reshape(choice.shape)
            choice = choice.masked_fill(~expert_mask, float("-inf"))
        indices = choice.topk(moe.num_experts_per_tok, dim=-1, sorted=False).indices
        weights = scores.gather(1, indices)
        if moe.norm_topk_prob:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        return weights * moe.routed_scaling_factor, indices

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> nn.Module:
        # Follow device moves (and to_empty) but keep float32 through model.to(bfloat16): a cast
        # is replaced by a plain device copy of the float32 tensor.
        def keep_float32(t: torch.Tensor) -> torch.Tensor:
            moved = fn(t)
            return moved if moved.dtype == t.dtype else t.to(device=moved.device)

        return super()._apply(keep_float32, recurse)


class MoE(nn.Module):
    """Routed experts (``experts.<i>``, one ``MLP`` each) plus the always-on ``shared_experts``.

    Inference (autograd off) computes the routed experts together (``moe_grouped``), over
    weights stacked on first use; training and quantized experts take ``forward_reference``.
    """

    def __init__(self, hidden_size: int, moe: MoEConfig) -> None:
        super().__init__()
        self.gate = TopkRouter(hidden_size, moe)
        self.experts = nn.ModuleList(
            MLP(hidden_size, moe.moe_intermediate_size) for _ in range(moe.n_routed_experts)
        )
        shared = moe.moe_intermediate_size * moe.n_shared_experts
        self.shared_experts = MLP(hidden_size, shared) if shared else None
        # Plain attribute, not a buffer: ``model.to`` must not copy it (the experts' weights
        # are views of it); ``StackedExperts.still_current`` notices when they stop being.
        self._stacked: StackedExperts | None = None
        self._unstackable: list[tuple[nn.Module, ...]] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stacked = None if torch.is_grad_enabled() else self._stacked_experts()
        if stacked is None:
            return self.forward_reference(x)
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # (N, hidden)
        weights, indices = self.gate(flat)
        out = grouped_experts(flat, weights, indices, stacked)
        if self.shared_experts is not None:
            out = out + self.shared_experts(flat)
        return out.view(shape)

    def forward_reference(self, x: torch.Tensor) -> torch.Tensor:
        """One pass per chosen expert (as transformers does): the oracle for the grouped path,
        and the differentiable path training uses."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # (N, hidden)
        weights, indices = self.gate(flat)
        out = torch.zeros_like(flat)
        # One pass per expert that any token chose, in expert order (as transformers does).
        for expert in torch.unique(indices).tolist():
            token, slot = torch.where(indices == expert)
            y = self.experts[expert](flat[token]) * weights[token, slot, None]
            out.index_add_(0, token, y.to(out.dtype))
        if self.shared_experts is not None:
            out = out + self.shared_experts(flat)
        return out.view(shape)

    def _stacked_experts(self) -> StackedExperts | None:
        stacked = self._stacked
        if stacked is not None and stacked.still_current(self.experts):
            return stacked
        self._stacked = None
        if self._unstackable is not None and self._unstackable == projections(self.experts):
            return None  # e.g. quantized experts: checked once, not restacked every call
        self._stacked = stack_experts(self.experts)
        self._unstackable = None if self._stacked is not None else projections(self.experts)
        return self._stacked
