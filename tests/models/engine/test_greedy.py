"""The two-level greedy pick against one indexed ``max`` over each row, on fresh random logits."""

from __future__ import annotations

import pytest
import torch

from ember.models.engine.sampling import greedy_tokens, greedy_tokens_reference


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 8192), (64, 8192), (5, 1024), (3, 1000), (2, 100)])
def test_greedy_tokens_equal_the_reference(dtype: torch.dtype, shape: tuple[int, int]) -> None:
    seed = int(torch.randint(0, 2**31, ()))
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(shape, generator=gen).to(dtype)
    assert greedy_tokens(logits) == greedy_tokens_reference(logits), f"seed {seed}"
    assert greedy_tokens_reference(logits) == logits.float().argmax(dim=-1).tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_ties_pick_the_first_maximum_as_argmax_does(dtype: torch.dtype) -> None:
    seed = int(torch.randint(0, 2**31, ()))
    gen = torch.Generator().manual_seed(seed)
    # Few distinct values: every row has its maximum many times, in several blocks.
    logits = torch.randint(-3, 4, (32, 4096), generator=gen).to(dtype)
    want = logits.float().argmax(dim=-1).tolist()
    assert greedy_tokens(logits) == want, f"seed {seed}"
    # A row whose only maximum is the last token, and one whose maxima open two blocks.
    logits[0] = 0
    logits[0, -1] = 9
    logits[1] = 0
    logits[1, 64] = logits[1, 65] = logits[1, 4000] = 9
    assert greedy_tokens(logits)[:2] == [4095, 64]
    # Non-contiguous rows (e.g. the kept rows of a step with a failed integrity check).
    assert greedy_tokens(logits[::2]) == greedy_tokens_reference(logits[::2])
