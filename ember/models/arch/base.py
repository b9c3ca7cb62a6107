"""The decoder shared by all three architectures; each arch file only picks its attention.

Parameter names follow the HF checkpoints (``model.embed_tokens``, ``model.layers.<i>.self_attn``,
``.mlp`` (dense ``MLP`` or ``MoE``), ``.input_layernorm``, ``.post_attention_layernorm``,
``model.norm``, ``lm_head``) so real weights load by name.

Two forwards:

- ``reference_forward(input_ids (B, S)) -> logits (B, S, V)``: whole sequences from position 0, no
  cache, naive attention; differentiable (training uses it); the oracle for every fast path.
- ``forward(input_ids (T,), backend) -> logits``: one flat batch of new tokens of several
  sequences; the ``AttentionBackend`` stores the cache and attends (see attention/backend.py).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from ember.models.attention.backend import AttentionBackend
from ember.models.config import ModelConfig
from ember.models.layers.mlp import MLP
from ember.models.layers.moe import MoE
from ember.models.layers.norm import RMSNorm
from ember.models.layers.packed import PackedLinear, can_pack
from ember.models.layers.rotary import RotaryEmbedding


class Attention(Protocol):
    """What a decoder layer needs from its ``self_attn`` (MLA or GQA)."""

    def reference(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, topk: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def forward_cached(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        backend: AttentionBackend,
        layer: int,
        topk: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]: ...


class DecoderLayer(nn.Module):
    """Pre-norm residual block: attention, then a dense MLP or an MoE."""

    def __init__(self, config: ModelConfig, layer_idx: int, self_attn: nn.Module) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.self_attn = self_attn
        if config.moe_layers[layer_idx]:
            self.mlp: nn.Module = MoE(hidden, config.moe)
        else:
            self.mlp = MLP(hidden, config.intermediate_size)
        self.input_layernorm = RMSNorm(hidden, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(hidden, config.rms_norm_eps)

    def _attention(self) -> Attention:
        return self.self_attn  # type: ignore[return-value]

    def reference(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, topk: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attn, topk = self._attention().reference(self.input_layernorm(x), cos, sin, topk)
        x = x + attn
        return x + self.mlp(self.post_attention_layernorm(x)), topk

    def forward_cached(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        backend: AttentionBackend,
        layer: int,
        topk: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        normed = self.input_layernorm(x)
        attn, topk = self._attention().forward_cached(normed, cos, sin, backend, layer, topk)
        x = x + attn
        return x + self.mlp(self.post_attention_layernorm(x)), topk


class DecoderModel(nn.Module):
    """``model.*``: embeddings, decoder layers, final norm."""

    def __init__(self, config: ModelConfig, layers: list[DecoderLayer]) -> None:
        super().__init__()
        # nn.Embedding draws its weight at construction; on the meta device (every checkpoint
        # load builds there) that normal_ runs torch's Python reference, whose first call imports
        # torch._dynamo, ~1.2 CPU-s per process for values that do not exist. Elsewhere it draws
        # as nn.Embedding does, so a seeded build is the same model.
        shape = (config.vocab_size, config.hidden_size)
        self.embed_tokens = nn.Embedding(*shape, _weight=torch.empty(shape))
        if self.embed_tokens.weight.device.type != "meta":
            self.embed_tokens.reset_parameters()
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class CausalLM(nn.Module):
    """A decoder-only MoE language model; subclasses choose the attention module per layer."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        layers = [
            DecoderLayer(config, i, self.make_attention(config, i))
            for i in range(config.num_hidden_layers)
        ]
        self.model = DecoderModel(config, layers)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.rotary = RotaryEmbedding(config.rope)
        self.tie_weights()

    @staticmethod
    def make_attention(config: ModelConfig, layer_idx: int) -> nn.Module:
        """The ``self_attn`` module of layer ``layer_idx`` (each architecture decides)."""
        raise NotImplementedError

    def tie_weights(self) -> None:
        """With ``tie_word_embeddings``, ``lm_head`` reuses the embedding matrix."""
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def pack_lm_head(self) -> bool:
        """Swap ``lm_head`` for its prepacked form (``layers/packed.py``: bit-identical BF16
        logits at ~0.8x the CPU time, no second copy of the vocabulary matrix). Not when it is
        tied to the embeddings (the embedding lookup needs the plain matrix) or cannot be packed
        (float32, quantized). Returns whether ``lm_head`` is now packed."""
        if isinstance(self.lm_head, PackedLinear):
            return True
        if self.config.tie_word_embeddings or not can_pack(self.lm_head):
            return False
        self.lm_head = PackedLinear.of(self.lm_head)
        return True

    def unpack_lm_head(self) -> None:
        """Back to a plain ``nn.Linear`` ``lm_head`` (the reference path; training)."""
        if isinstance(self.lm_head, PackedLinear):
            self.lm_head = self.lm_head.unpacked()

    def reference_forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``input_ids`` (B, S) of whole sequences -> logits (B, S, vocab). Slow and plain."""
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, seq), got shape {tuple(input_ids.shape)}")
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        cos, sin = self.rotary(positions.expand(input_ids.shape[0], -1))  # (B, S, R/2)
        x = self.model.embed_tokens(input_ids)
        topk: torch.Tensor | None = None
        for layer in self.model.layers:
            x, topk = layer.reference(x, cos, sin, topk)
        return self.lm_head(self.model.norm(x))

    def forward(
        self,
        input_ids: torch.Tensor,
        backend: AttentionBackend,
        logits_indices: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One flat batch: ``input_ids`` (T,) laid out as ``backend.layout`` says.

        Returns logits (T, vocab), or only the rows ``logits_indices`` (e.g. each sequence's last
        token) so a decode step does not pay the vocabulary projection for every prefill token.
        """
        layout = backend.layout
        if input_ids.shape != (layout.num_tokens,):
            raise ValueError(
                f"input_ids has shape {tuple(input_ids.shape)}, "
                f"the layout expects ({layout.num_tokens},)"
            )
        positions = torch.tensor(layout.positions(), device=input_ids.device)
        cos, sin = self.rotary(positions)  # (T, R/2)
        x = self.model.embed_tokens(input_ids)
        # Cast once here, not in each layer's rotary (apply_rotary's own cast is then a no-op).
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        topk: torch.Tensor | None = None
        for i, layer in enumerate(self.model.layers):
            x, topk = layer.forward_cached(x, cos, sin, backend, i, topk)
        x = self.model.norm(x)
        if logits_indices is not None:
            x = x[logits_indices]
        return self.lm_head(x)
