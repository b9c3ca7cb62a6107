"""A tiny decoder with the HF module names of the real architectures, for quantization tests.

A stand-in until the architectures land on main: ``model.embed_tokens``, ``model.layers.<i>``
with ``self_attn.{q,k,v,o}_proj`` and ``self_attn.kv_b_proj`` (read as a matrix, as MLA does),
``mlp`` (dense ``{gate,up,down}_proj`` or an MoE with a non-Linear router ``mlp.gate``, routed
``mlp.experts.<e>.*`` and ``mlp.shared_experts``), ``model.norm`` and ``lm_head``. Shapes follow
the tiny checkpoints (hidden 256, moe_intermediate 128, dense 768).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ember.models.quant import QuantizedLinear


def _weight(module: nn.Module) -> torch.Tensor:
    if isinstance(module, QuantizedLinear):
        return module.dequantized_weight()
    return module.weight


class MLP(nn.Module):
    def __init__(self, hidden: int, inner: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inner, bias=False)
        self.up_proj = nn.Linear(hidden, inner, bias=False)
        self.down_proj = nn.Linear(inner, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Router(nn.Module):
    def __init__(self, hidden: int, experts: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(experts, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.float(), self.weight.float()).softmax(-1)


class MoE(nn.Module):
    def __init__(self, hidden: int, inner: int, experts: int, top_k: int) -> None:
        super().__init__()
        self.top_k = top_k
        self.gate = Router(hidden, experts)
        self.experts = nn.ModuleList(MLP(hidden, inner) for _ in range(experts))
        self.shared_experts = MLP(hidden, inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        weights, chosen = self.gate(flat).topk(self.top_k, dim=-1)
        out = self.shared_experts(flat)
        for e in torch.unique(chosen).tolist():
            token, slot = torch.where(chosen == e)
            y = self.experts[e](flat[token]) * weights[token, slot, None].to(flat.dtype)
            out = out.index_add(0, token, y)
        return out.view(x.shape)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(hidden, hidden, bias=True)
        self.k_proj = nn.Linear(hidden, hidden, bias=True)
        self.v_proj = nn.Linear(hidden, hidden, bias=True)
        self.kv_b_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k = self.q_proj(x), self.k_proj(x)
        v = x @ _weight(self.kv_b_proj).t() + self.v_proj(x)  # a direct matrix read, as MLA does
        split = [t.view(b, s, self.heads, -1).transpose(1, 2) for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*split, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, h))


class Layer(nn.Module):
    def __init__(self, hidden: int, mlp: nn.Module) -> None:
        super().__init__()
        self.input_layernorm = nn.RMSNorm(hidden)
        self.self_attn = Attention(hidden, heads=4)
        self.post_attention_layernorm = nn.RMSNorm(hidden)
        self.mlp = mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, vocab: int, hidden: int, layers: list[Layer]) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(layers)
        self.norm = nn.RMSNorm(hidden)


class TinyMoE(nn.Module):
    def __init__(
        self,
        vocab: int = 2048,
        hidden: int = 256,
        dense_inner: int = 768,
        moe_inner: int = 128,
        experts: int = 8,
        top_k: int = 2,
        tie: bool = False,
    ) -> None:
        super().__init__()
        layers = [
            Layer(hidden, MLP(hidden, dense_inner)),
            Layer(hidden, MoE(hidden, moe_inner, experts, top_k)),
        ]
        self.model = Decoder(vocab, hidden, layers)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        if tie:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))


def build_tiny_moe(seed: int, dtype: torch.dtype = torch.float32, **kwargs: object) -> TinyMoE:
    """Random weights scaled 1/sqrt(fan_in) so activations keep their size through the stack."""
    generator = torch.Generator().manual_seed(seed)
    model = TinyMoE(**kwargs)  # type: ignore[arg-type]
    with torch.no_grad():
        for param in model.parameters():
            std = param.shape[-1] ** -0.5 if param.dim() > 1 else 0.1
            param.copy_(torch.randn(param.shape, generator=generator) * std)
        for name, module in model.named_modules():
            if isinstance(module, nn.RMSNorm):
                module.weight.fill_(1.0)
            elif name.endswith(("o_proj", "down_proj")):
                # Residual branches start small (as GPT-2's init does), so the residual stream
                # is not dominated by amplified noise, as in a trained model.
                module.weight.mul_(0.25)
    return model.to(dtype).eval()
