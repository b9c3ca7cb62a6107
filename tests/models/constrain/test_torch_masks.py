"""Masks applied to a logits batch equal a plain per-element loop."""

from __future__ import annotations

import random

import pytest
import torch

from ember.models.constrain.masks import TokenMask
from ember.models.constrain.torch_masks import apply_token_masks, masks_to_bool


def _reference(logits: torch.Tensor, masks: list[TokenMask | None]) -> torch.Tensor:
    out = logits.clone()
    for row, mask in enumerate(masks):
        if mask is None:
            continue
        for token in range(out.shape[1]):
            if not mask.allows(token):
                out[row, token] = float("-inf")
    return out


@pytest.mark.parametrize("seed", range(5))
def test_apply_token_masks_matches_the_loop(seed: int) -> None:
    rng = random.Random(seed)
    width = rng.choice([7, 64, 130, 257])
    size = width - rng.randint(0, 5)  # the embedding may be wider than the vocabulary
    masks: list[TokenMask | None] = [
        None
        if rng.random() < 0.3
        else TokenMask.from_ids(rng.sample(range(size), rng.randint(0, size)), size)
        for _ in range(4)
    ]
    logits = torch.randn(4, width, generator=torch.Generator().manual_seed(seed))
    expected = _reference(logits, masks)
    assert torch.equal(apply_token_masks(logits, masks), expected)


def test_masks_to_bool_and_shape_errors() -> None:
    allowed = masks_to_bool([TokenMask.from_ids([1, 8], 9)], 10)
    assert allowed.tolist() == [
        [False, True, False, False, False, False, False, False, True, False]
    ]
    with pytest.raises(ValueError, match=r"expected logits of shape \(2, V\)"):
        apply_token_masks(torch.zeros(3, 4), [None, None])
