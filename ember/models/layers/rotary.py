"""Rotary position embeddings: default and YaRN frequencies, interleaved and half-split layouts.

Shapes: ``R`` rotated dims; ``cos``/``sin`` carry one angle per rotated pair, ``(..., R/2)``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ember.models.config import RopeConfig


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction ``0.1 * mscale * ln(factor) + 1`` (1 when not extending)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def softmax_mscale(rope: RopeConfig) -> float:
    """Extra factor on MLA's softmax scale: ``yarn_mscale(factor, mscale_all_dim) ** 2``.

    DeepSeek scales attention logits by this under YaRN (and the cos/sin by
    ``mscale / mscale_all_dim``, which is 1 when the two are equal, as in Kimi K2).
    """
    if rope.kind != "yarn" or not rope.mscale_all_dim:
        return 1.0
    return yarn_mscale(rope.factor, rope.mscale_all_dim) ** 2


def rope_frequencies(rope: RopeConfig) -> tuple[torch.Tensor, float]:
    """Inverse frequencies ``(R/2,)`` in float32 on the CPU, and the scale applied to cos/sin."""
    dim = rope.dim
    exponents = torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim
    pos_freqs = rope.theta**exponents
    inv_freq_extrapolation = 1.0 / pos_freqs
    if rope.kind == "default":
        return inv_freq_extrapolation, 1.0
    inv_freq_interpolation = 1.0 / (rope.factor * pos_freqs)
    original = rope.original_max_position_embeddings or 1

    def correction_dim(num_rotations: float) -> float:
        # The dim index whose wavelength fits num_rotations times into the original context.
        return dim * math.log(original / (num_rotations * 2 * math.pi)) / (2 * math.log(rope.theta))

    low, high = correction_dim(rope.beta_fast), correction_dim(rope.beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = ((torch.arange(dim // 2, dtype=torch.float32, device="cpu") - low) / (high - low)).clamp(
        0, 1
    )
    extrapolation = 1 - ramp  # 1: keep the original frequency, 0: interpolate by `factor`
    inv_freq = inv_freq_interpolation * (1 - extrapolation) + inv_freq_extrapolation * extrapolation
    if rope.attention_factor is not None:
        attention_factor = rope.attention_factor
    elif rope.mscale and rope.mscale_all_dim:
        attention_factor = yarn_mscale(rope.factor, rope.mscale) / yarn_mscale(
            rope.factor, rope.mscale_all_dim
        )
    else:
        attention_factor = yarn_mscale(rope.factor)
    return inv_freq, attention_factor


class RotaryEmbedding(nn.Module):
    """Turns token positions into ``(cos, sin)``; holds no parameters or buffers.

    The frequencies are a plain CPU tensor rather than a buffer so a model built on the meta
    device (for accounting, or before loading weights) still has real frequencies.
    """

    def __init__(self, rope: RopeConfig) -> None:
        super().__init__()
        self.rope = rope
        self.inv_freq, self.attention_factor = rope_frequencies(rope)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``positions`` (...,) integer -> ``cos``, ``sin`` (..., R/2) in float32."""
        freqs = positions[..., None].float() * self.inv_freq.to(positions.device)
        return freqs.cos() * self.attention_factor, freqs.sin() * self.attention_factor


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, interleaved: bool
) -> torch.Tensor:
    """Rotate the last dim of ``x`` (..., R) by per-pair angles ``cos``/``sin`` (..., R/2).

    ``interleaved`` (DeepSeek) pairs dims (0, 1), (2, 3)...; otherwise (GPT-NeoX / GLM) pairs
    (i, i + R/2). Either way the result is laid out as [rotated first members, rotated second
    members], which is what DeepSeek's reference code and transformers produce, so cached rotary
    keys from any implementation agree.
    """
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    else:
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
