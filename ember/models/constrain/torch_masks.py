"""Applying token masks to a batch of logits (the one torch-dependent piece of constrained
decoding; everything else in this package is torch-free)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ember.models.constrain.masks import TokenMask


def masks_to_bool(
    masks: Sequence[TokenMask | None], width: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """``(len(masks), width)`` bool tensor, True where a token is allowed (a ``None`` row allows
    everything). Ids at or past a mask's size (padding rows of the embedding) are not allowed."""
    row_bytes = (width + 7) // 8
    packed = bytearray(row_bytes * len(masks))
    for row, mask in enumerate(masks):
        data = b"\xff" * row_bytes if mask is None else mask.packed()[:row_bytes]
        packed[row * row_bytes : row * row_bytes + len(data)] = data
    if not masks:
        return torch.zeros((0, width), dtype=torch.bool, device=device)
    table = torch.frombuffer(packed, dtype=torch.uint8).view(len(masks), row_bytes)
    # Unpack on the target device: 8x fewer bytes cross to an accelerator.
    table = table.to(device)
    shifts = torch.arange(8, dtype=torch.uint8, device=table.device)
    bits = (table.unsqueeze(-1) >> shifts) & 1
    return bits.view(len(masks), row_bytes * 8)[:, :width].bool()


def apply_token_masks(logits: torch.Tensor, masks: Sequence[TokenMask | None]) -> torch.Tensor:
    """Set disallowed logits to -inf in place, row by row (``None``: row unconstrained).
    ``logits`` is ``(B, V)``; returns it."""
    if logits.dim() != 2 or logits.shape[0] != len(masks):
        raise ValueError(f"expected logits of shape ({len(masks)}, V), got {tuple(logits.shape)}")
    if all(m is None for m in masks):
        return logits
    allowed = masks_to_bool(masks, logits.shape[1], logits.device)
    return logits.masked_fill_(~allowed, float("-inf"))
