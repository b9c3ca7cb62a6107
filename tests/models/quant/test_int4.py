"""INT4: round-trip bounds, packing, and the CPU kernel vs the dequantize reference."""

from __future__ import annotations

import pytest
import torch

from ember.errors import ConfigError
from ember.models.quant.int4 import (
    dequantize_int4,
    int4_from_signed,
    int4_linear_reference,
    pack_nibbles,
    quantize_int4,
    unpack_nibbles,
)
from ember.models.quant.int4_kernel import (
    cpu_int4_kernel_available,
    int4_cpu_kernel_linear,
    int4_kernel_dtype,
    int4_linear_fallback,
    prepare_int4_cpu_kernel,
)
from ember.models.quant.linear import QuantizedLinear
from ember.models.quant.methods import Int4LinearMethod

SHAPES = [(64, 256), (50, 100), (7, 300), (48, 64), (1, 33), (130, 512)]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12))


def test_pack_unpack_are_inverse_and_match_compressed_tensors_int32_order() -> None:
    g = torch.Generator().manual_seed(1)
    values = torch.randint(0, 16, (5, 48), generator=g, dtype=torch.uint8)
    packed = pack_nibbles(values)
    assert torch.equal(unpack_nibbles(packed), values)
    # compressed-tensors: value i of each 8 lives in bits [4i, 4i + 4) of an int32.
    words = packed.view(torch.int32)
    for i in range(8):
        assert torch.equal((words >> (4 * i)) & 0xF, values[:, i::8].to(torch.int32))


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip_error_is_at_most_half_a_step(
    shape: tuple[int, int], group_size: int, symmetric: bool
) -> None:
    g = torch.Generator().manual_seed(hash((shape, group_size, symmetric)) % 2**31)
    w = torch.randn(shape, generator=g) * 0.05
    q = quantize_int4(w, group_size, symmetric=symmetric)
    assert q.packed.dtype == torch.uint8
    assert q.padded_in_features % group_size == 0
    restored = dequantize_int4(q)
    assert restored.shape == w.shape
    step = q.scales.float().repeat_interleave(group_size, dim=1)[:, : shape[1]]
    # Half a step, plus (asymmetric) the rounding of the BF16 zero: half a BF16 ulp of it.
    slack = torch.full_like(w, 1e-7)
    if q.zeros is not None:
        zeros = q.zeros.float().abs().repeat_interleave(group_size, dim=1)[:, : shape[1]]
        slack = slack + zeros * 2.0**-8
    assert bool(((restored - w).abs() <= step * 0.5 * 1.01 + slack).all())
    # And not trivially: the error is a real fraction of a step on random data.
    assert float((restored - w).abs().mean()) > float(step.mean()) * 0.1


def test_symmetric_keeps_zero_exact_and_maps_the_extremes_to_the_ends_of_the_grid() -> None:
    w = torch.zeros(16, 64)
    w[0, 0], w[0, 1], w[1, 0] = 1.0, -1.0, 0.3
    q = quantize_int4(w, 32)
    restored = dequantize_int4(q)
    assert float(restored[2:].abs().max()) == 0.0
    assert float(restored[0, 2:].abs().max()) == 0.0
    unsigned = unpack_nibbles(q.packed)
    # amax sits at 7.5 steps minus the scale's upward rounding: +1 -> q = 7, -1 -> q = -7 or -8.
    assert int(unsigned[0, 0]) == 15
    assert int(unsigned[0, 1]) in (0, 1)
    assert float(q.scales[0, 0]) >= 1.0 / 7.5


def test_asymmetric_has_lower_error_than_symmetric_on_offset_groups() -> None:
    g = torch.Generator().manual_seed(3)
    w = torch.rand(64, 256, generator=g)  # all positive: half of a symmetric grid is unused
    sym = (dequantize_int4(quantize_int4(w, 32)) - w).abs().mean()
    asym = (dequantize_int4(quantize_int4(w, 32, symmetric=False)) - w).abs().mean()
    assert float(asym) < 0.6 * float(sym)


def test_bad_group_size_is_a_config_error_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match="group_size.*32, 64, 128"):
        quantize_int4(torch.randn(4, 64), 48)


def test_int4_from_signed_rejects_out_of_range_values() -> None:
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        int4_from_signed(torch.full((2, 32), 8), torch.ones(2, 1), None, 32, 32)


needs_kernel = pytest.mark.skipif(not cpu_int4_kernel_available(), reason="no CPU int4 kernel")


@needs_kernel
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("shape", SHAPES)
def test_cpu_kernel_matches_reference_in_float32(
    shape: tuple[int, int], group_size: int, symmetric: bool
) -> None:
    g = torch.Generator().manual_seed(hash((shape, group_size, symmetric, "k")) % 2**31)
    n, k = shape
    q = quantize_int4(torch.randn(shape, generator=g), group_size, symmetric=symmetric)
    kernel = prepare_int4_cpu_kernel(q, torch.float32)
    assert kernel is not None
    bias = torch.randn(n, generator=g)
    for rows in (1, 3, 64):
        x = torch.randn(rows, k, generator=g)
        expected = int4_linear_reference(x, q, bias)
        got = int4_cpu_kernel_linear(x, kernel, bias)
        assert got.shape == (rows, n)
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


@needs_kernel
def test_cpu_kernel_in_bfloat16_is_close_and_keeps_leading_dims() -> None:
    g = torch.Generator().manual_seed(5)
    q = quantize_int4(torch.randn(96, 256, generator=g), 32)
    kernel = prepare_int4_cpu_kernel(q, torch.bfloat16)
    assert kernel is not None
    x = torch.randn(2, 5, 256, generator=g).to(torch.bfloat16)
    got = int4_cpu_kernel_linear(x, kernel)
    expected = int4_linear_reference(x.float(), q)
    assert got.shape == (2, 5, 96) and got.dtype == torch.bfloat16
    assert _rel(got, expected) < 1e-2
    empty = int4_cpu_kernel_linear(x[:, :0], kernel)
    assert empty.shape == (2, 0, 96)


def test_fallback_matches_reference() -> None:
    g = torch.Generator().manual_seed(6)
    q = quantize_int4(torch.randn(40, 100, generator=g), 64, symmetric=False)
    x = torch.randn(3, 100, generator=g)
    torch.testing.assert_close(int4_linear_fallback(x, q), int4_linear_reference(x, q))


def test_kernel_is_refused_for_unsupported_dtypes() -> None:
    q = quantize_int4(torch.randn(16, 64), 32)
    assert prepare_int4_cpu_kernel(q, torch.float64) is None


KERNEL_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("capability", ["AVX2", "AVX512"])
@pytest.mark.parametrize("compute", KERNEL_DTYPES)
def test_on_x86_the_kernel_runs_in_bf16_whatever_the_compute_dtype(
    capability: str, compute: torch.dtype
) -> None:
    # int4mm_kernel.cpp vectorises its AVX2/AVX512 kernel for BFloat16 only.
    assert int4_kernel_dtype(compute, capability) is torch.bfloat16


@pytest.mark.parametrize("capability", ["DEFAULT", "NO AVX", "SVE256", "VSX"])
@pytest.mark.parametrize("compute", KERNEL_DTYPES)
def test_elsewhere_the_kernel_keeps_the_compute_dtype(
    capability: str, compute: torch.dtype
) -> None:
    assert int4_kernel_dtype(compute, capability) is compute


def test_a_dtype_the_kernel_lacks_is_left_to_the_fallback() -> None:
    assert int4_kernel_dtype(torch.float64, "AVX2") is torch.float64


def _bf16_bound(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """What running a float32 product through BF16 may move each output by: every activation
    rounded to 8 significant bits (|x_k w_k| / 256 per term at most), then the float32 sum
    rounded to 8 bits on the way out (|y| / 256), plus float32 slack for the summation order."""
    unit = 2.0**-8
    return unit * (x.abs() @ w.abs().t() + y.abs()) * 1.01 + 1e-6


@needs_kernel
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("shape", [(128, 256), (256, 128), (50, 100)])
def test_a_float32_layer_on_the_kernel_matches_the_reference_within_bf16_rounding(
    shape: tuple[int, int], symmetric: bool
) -> None:
    g = torch.Generator().manual_seed(hash((shape, symmetric, "f32")) % 2**31)
    n, k = shape
    weight, bias = torch.randn(shape, generator=g), torch.randn(n, generator=g)
    fast = QuantizedLinear.from_dense(
        weight, bias, Int4LinearMethod(32, symmetric=symmetric), compute_dtype=torch.float32
    )
    slow = QuantizedLinear.from_dense(
        weight,
        bias,
        Int4LinearMethod(32, symmetric=symmetric, use_kernels=False),
        compute_dtype=torch.float32,
    )
    assert fast.kernel_scales_and_zeros.dtype is int4_kernel_dtype(torch.float32)
    w = slow.dequantized_weight(torch.float32)
    for rows in (1, 5, 64):
        x = torch.randn(rows, k, generator=g)
        got, expected = fast(x), slow(x)
        assert got.dtype is torch.float32 and got.shape == (rows, n)
        excess = (got - expected).abs() - _bf16_bound(x, w, expected - bias)
        assert float(excess.max()) <= 0, float(excess.max())
        # and the kernel is not exact by accident: float32 in, BF16 inside, so some rounding
        if int4_kernel_dtype(torch.float32) is torch.bfloat16:
            assert not torch.equal(got, expected)
