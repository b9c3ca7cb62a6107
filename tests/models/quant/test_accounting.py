"""Bits per weight by formula, and the formula against the bytes real tensors occupy."""

from __future__ import annotations

import pytest
import torch

from ember.models.quant import bits_per_weight
from ember.models.quant.accounting import matrix_nbytes
from ember.models.quant.fp8 import quantize_fp8_block
from ember.models.quant.int4 import quantize_int4
from ember.models.quant.int4_kernel import cpu_int4_kernel_available, prepare_int4_cpu_kernel


def test_published_bits_per_weight() -> None:
    assert bits_per_weight("none") == 16
    assert bits_per_weight("int4", group_size=32) == 4.5  # Kimi K2 native INT4, BF16 scales
    assert bits_per_weight("int4", group_size=64) == 4.25
    assert bits_per_weight("int4", group_size=128) == 4.125
    assert bits_per_weight("int4", group_size=32, symmetric=False) == 5.0
    assert bits_per_weight("fp8") == pytest.approx(8.002, abs=1e-3)
    # The CPU kernel keeps a scale and a zero per group in the activation dtype.
    assert bits_per_weight("int4", group_size=32, int4_layout="cpu_kernel") == 5.0
    assert bits_per_weight("int4", group_size=128, int4_layout="cpu_kernel") == 4.25
    assert bits_per_weight("int4", dtype=torch.float32, int4_layout="cpu_kernel") == 6.0


@pytest.mark.parametrize("shape", [(512, 2048), (128, 256), (50, 100), (576, 7)])
@pytest.mark.parametrize("group_size", [32, 128])
def test_formula_equals_real_bytes(shape: tuple[int, int], group_size: int) -> None:
    n, k = shape
    w = torch.randn(shape)
    for symmetric in (True, False):
        q = quantize_int4(w, group_size, symmetric=symmetric)
        assert q.nbytes() == matrix_nbytes("int4", n, k, group_size=group_size, symmetric=symmetric)
    assert quantize_fp8_block(w).nbytes() == matrix_nbytes("fp8", n, k)
    if cpu_int4_kernel_available():
        kernel = prepare_int4_cpu_kernel(quantize_int4(w, group_size), torch.bfloat16)
        assert kernel is not None
        assert kernel.nbytes() == matrix_nbytes(
            "int4", n, k, group_size=group_size, int4_layout="cpu_kernel"
        )


def test_glm_expert_bytes() -> None:
    # One GLM-5.2 expert projection (6144 x 2048): BF16 24 MiB, FP8 ~12 MiB, INT4 g32 6.75 MiB.
    n, k = 2048, 6144
    assert matrix_nbytes("none", n, k) == 25_165_824
    assert matrix_nbytes("fp8", n, k) == 12_582_912 + 16 * 48 * 4
    assert matrix_nbytes("int4", n, k, group_size=32) == 6_291_456 + 2048 * 192 * 2


def test_unknown_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="none, fp8 or int4"):
        bits_per_weight("int3")
