"""Block FP8: round-trip bound, partial blocks, scale bytes, fast vs reference matmul."""

from __future__ import annotations

import pytest
import torch

from ember.models.quant.fp8 import (
    FP8_DTYPE,
    dequantize_fp8_block,
    dequantize_fp8_block_fast,
    expand_block_scales,
    fp8_linear,
    fp8_linear_reference,
    quantize_fp8_block,
)

SHAPES = [(256, 384), (300, 200), (5, 7), (576, 256), (128, 128), (129, 1000)]


@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip_within_e4m3_precision(shape: tuple[int, int]) -> None:
    g = torch.Generator().manual_seed(shape[0] * 1000 + shape[1])
    w = torch.randn(shape, generator=g) * 0.05
    w[0, 0] = 3.0  # one outlier: its block's scale grows, the others' do not
    fp8 = quantize_fp8_block(w)
    assert fp8.qweight.dtype == FP8_DTYPE and fp8.qweight.shape == w.shape
    rows, cols = -(-shape[0] // 128), -(-shape[1] // 128)
    assert fp8.scale_inv.shape == (rows, cols) and fp8.scale_inv.dtype == torch.float32
    restored = dequantize_fp8_block(fp8)
    scale = expand_block_scales(fp8)
    # e4m3: 3 mantissa bits -> relative error <= 2^-4 for normals; subnormal step 2^-9 * scale.
    bound = w.abs() * 2.0**-4 + scale * 2.0**-10
    assert bool(((restored - w).abs() <= bound * 1.0001).all())
    assert float(restored[0, 0]) == pytest.approx(3.0, rel=2**-4)
    # Every block's largest magnitude maps to 448 exactly.
    assert float(fp8.qweight.float().abs().max()) == 448.0


def test_scale_bytes_are_counted() -> None:
    fp8 = quantize_fp8_block(torch.randn(256, 384))
    assert fp8.nbytes() == 256 * 384 + 2 * 3 * 4


def test_zero_block_stays_zero() -> None:
    w = torch.zeros(200, 200)
    w[150:, 150:] = torch.randn(50, 50)
    restored = dequantize_fp8_block(quantize_fp8_block(w))
    assert float(restored[:128, :128].abs().max()) == 0.0


@pytest.mark.parametrize("shape", SHAPES)
def test_fast_path_matches_reference(shape: tuple[int, int]) -> None:
    g = torch.Generator().manual_seed(7 + shape[0])
    n, k = shape
    fp8 = quantize_fp8_block(torch.randn(shape, generator=g))
    assert torch.equal(dequantize_fp8_block_fast(fp8, torch.float32), dequantize_fp8_block(fp8))
    bias = torch.randn(n, generator=g)
    for rows in (1, 4):
        x = torch.randn(rows, k, generator=g)
        torch.testing.assert_close(fp8_linear(x, fp8, bias), fp8_linear_reference(x, fp8, bias))
    xb = torch.randn(2, 3, k, generator=g).to(torch.bfloat16)
    got = fp8_linear(xb, fp8)
    expected = fp8_linear_reference(xb.float(), fp8)
    assert got.dtype == torch.bfloat16 and got.shape == (2, 3, n)
    assert float((got.float() - expected).norm() / expected.norm()) < 1e-2


def test_bit_moving_conversion_is_exact_for_every_e4m3_value() -> None:
    from ember.models.quant.fp8 import _fp8_bits_as_bf16

    every = torch.arange(256, dtype=torch.uint8).view(FP8_DTYPE)
    finite = ~every.float().isnan()
    moved = _fp8_bits_as_bf16(every).float() * 2.0**120
    assert torch.equal(moved[finite], every.float()[finite])


def test_large_scales_take_the_plain_conversion() -> None:
    w = torch.randn(128, 128) * 1e5  # amax / 448 > 2^7: scale * 2^120 would overflow bf16
    fp8 = quantize_fp8_block(w)
    assert float(fp8.scale_inv.max()) > 2**7
    fast = dequantize_fp8_block_fast(fp8, torch.bfloat16)
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast.float(), dequantize_fp8_block(fp8), rtol=1e-2, atol=0)


@pytest.mark.parametrize("shape", SHAPES)
def test_bf16_fast_dequantization_equals_the_plain_bf16_formula(shape: tuple[int, int]) -> None:
    fp8 = quantize_fp8_block(torch.randn(shape, generator=torch.Generator().manual_seed(9)))
    scales = expand_block_scales(fp8).to(torch.bfloat16)
    plain = fp8.qweight.to(torch.bfloat16) * scales
    assert torch.equal(dequantize_fp8_block_fast(fp8, torch.bfloat16), plain)
