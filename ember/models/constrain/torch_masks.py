"""Applying token masks to a batch of logits (the one torch-dependent piece of constrained
decoding; everything else in this package is torch-free)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ember.models.constrain.masks import TokenMask


def masks_to_bool(
    masks: Sequence[TokenMask], width: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """``(len(masks), width)`` bool tensor, True where a token is allowed. Ids at or past a
    mask's size (padding rows of the embedding) are not allowed."""
    row_bytes = (width + 7) // 8
    packed = bytearray(row_bytes * len(masks))
    for row, mask in enumerate(masks):
        data = mask.packed()[:row_bytes]
        packed[row * row_bytes : row * row_bytes + len(data)] = data
    if not masks:
        return torch.zeros((0, width), dtype=torch.bool, device=device)
    table = torch.frombuffer(packed, dtype=torch.uint8).view(len(masks), row_bytes)
    shifts = torch.arange(8, dtype=torch.uint8)
    bits = (table.unsqueeze(-1) >> shifts) & 1
    return bits.view(len(masks), row_bytes * 8)[:, :width].bool().to(device)


def apply_token_masks(logits: torch.Tensor, masks: Sequence[TokenMask | None]) -> torch.Tensor:
    """Set disallowed logits to -inf in place, row by row (``None``: row unconstrained).
    ``logits`` is ``(B, V)``; returns it."""
    if logits.dim() != 2 or logits.shape[0] != len(masks):
        raise ValueError(f"expected logits of shape ({len(masks)}, V), got {tuple(logits.shape)}")
    rows = [i for i, m in enumerate(masks) if m is not None]
    if not rows:
        return logits
    allowed = masks_to_bool([masks[i] for i in rows], logits.shape[1], logits.device)  # type: ignore[misc]
    index = torch.tensor(rows, device=logits.device)
    logits[index] = logits[index].masked_fill(~allowed, float("-inf"))
    return logits
