"""The two-level greedy pick and the native one (``kernels/greedy.c``) against one indexed ``max``
over each row, on fresh random logits."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch

from ember.models.engine.sampling import greedy_tokens, greedy_tokens_reference
from ember.models.kernels import build, greedy
from ember.models.kernels.greedy import GreedyKernel


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


# -- the native pick (kernels/greedy.c) against the reference --------------------------------


@pytest.fixture(scope="module")
def kernel() -> GreedyKernel:
    loaded = greedy.load()
    if loaded is None:
        pytest.skip("no C compiler: the torch path is in use")
    return loaded


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 8192), (64, 8192), (5, 1000), (3, 17), (2, 15), (4, 1)])
def test_greedy_kernel_equals_the_reference(
    kernel: GreedyKernel, dtype: torch.dtype, shape: tuple[int, int]
) -> None:
    seed = int(torch.randint(0, 2**31, ()))
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(shape, generator=gen).to(dtype)
    assert kernel.fits(logits)
    assert greedy_tokens(logits, kernel) == greedy_tokens_reference(logits), f"seed {seed}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_greedy_kernel_ties_infinities_nans_and_strided_rows(
    kernel: GreedyKernel, dtype: torch.dtype
) -> None:
    seed = int(torch.randint(0, 2**31, ()))
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randint(-3, 4, (40, 1037), generator=gen).to(dtype)  # many ties per row
    logits[0] = float("-inf")  # all -inf: the first
    logits[1, 500] = float("inf")
    logits[1, 900] = float("inf")
    logits[2, 700] = float("nan")  # a NaN is the maximum, the first one wins
    logits[2, 3] = float("nan")
    logits[3, 1036] = float("nan")  # in the scalar tail
    logits[4] = 0.0
    logits[4, 10] = -0.0  # -0.0 == 0.0: the first
    logits[5] = -1.0
    logits[5, 1030] = 5.0  # the only maximum in the tail
    want = greedy_tokens_reference(logits)
    assert want[:6] == [0, 500, 3, 1036, 0, 1030]
    assert kernel.pick(logits) == want, f"seed {seed}"
    # Strided rows (the kept rows of a step with a failed integrity check).
    assert kernel.pick(logits[1::3]) == greedy_tokens_reference(logits[1::3]), f"seed {seed}"


def test_greedy_kernel_declines_what_it_cannot_read(kernel: GreedyKernel) -> None:
    logits = torch.randn(4, 64)
    assert not kernel.fits(logits.half())  # float16: the torch path
    assert not kernel.fits(logits.t())  # elements of a row not contiguous
    assert not kernel.fits(logits[0])  # 1-D
    assert greedy_tokens(logits.half(), kernel) == greedy_tokens_reference(logits.half())


def test_greedy_portable_build_equals_the_reference(tmp_path: Path) -> None:
    """The build without ``-march=native`` (scalar loops only) picks the same tokens."""
    portable = GreedyKernel(
        ctypes.CDLL(str(build.build_with(greedy.SOURCE, build.PORTABLE_CFLAGS, tmp_path)))
    )
    seed = int(torch.randint(0, 2**31, ()))
    gen = torch.Generator().manual_seed(seed)
    for dtype in (torch.float32, torch.bfloat16):
        logits = torch.randint(-3, 4, (16, 300), generator=gen).to(dtype)
        logits[0, 7] = float("nan")
        logits[1] = float("-inf")
        assert portable.pick(logits) == greedy_tokens_reference(logits), f"seed {seed}"
