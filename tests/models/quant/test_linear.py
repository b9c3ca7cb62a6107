"""QuantizedLinear + LinearMethods: drop-in forward, fast vs reference, storage dtypes, bytes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ember.models.quant import (
    Fp8LinearMethod,
    Int4LinearMethod,
    QuantizedLinear,
    UnquantizedLinearMethod,
)
from ember.models.quant.accounting import matrix_nbytes
from ember.models.quant.fp8 import FP8_DTYPE
from ember.models.quant.int4_kernel import cpu_int4_kernel_available


def _linear(n: int, k: int, seed: int, bias: bool = True) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(k, n, bias=bias)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().float() - b.detach().float()).norm() / b.detach().float().norm())


@pytest.mark.parametrize(
    "make_method",
    [
        lambda fast: Fp8LinearMethod(use_kernels=fast),
        lambda fast: Int4LinearMethod(32, use_kernels=fast),
        lambda fast: Int4LinearMethod(64, symmetric=False, use_kernels=fast),
    ],
    ids=["fp8", "int4-g32-sym", "int4-g64-asym"],
)
@pytest.mark.parametrize("shape", [(96, 256), (50, 100)])
def test_fast_layer_matches_reference_layer(make_method, shape: tuple[int, int]) -> None:
    n, k = shape
    linear = _linear(n, k, seed=n + k)
    fast = QuantizedLinear.from_linear(linear, make_method(True))
    slow = QuantizedLinear.from_linear(linear, make_method(False))
    x = torch.randn(7, k)
    if fast.method.scheme == "int4" and "kernel_packed" in fast._buffers:
        # The INT4 kernel runs in BF16 on x86 even for a float32 layer (int4_kernel_dtype):
        # activations and outputs are rounded to 8 significant bits, so BF16's tolerance.
        # test_int4.py bounds that rounding element by element.
        torch.testing.assert_close(fast(x), slow(x), rtol=1.6e-2, atol=1e-2)
    else:
        torch.testing.assert_close(fast(x), slow(x), rtol=1e-4, atol=1e-4)
    # Quantization error is real but bounded against the dense layer.
    assert 1e-4 < _rel(fast(x), linear(x)) < 0.15
    dense = fast.dequantized_weight(torch.float32)
    torch.testing.assert_close(dense, slow.dequantized_weight(torch.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not cpu_int4_kernel_available(), reason="no CPU int4 kernel")
def test_int4_layer_repacks_for_the_kernel_and_drops_the_checkpoint_layout() -> None:
    layer = QuantizedLinear.from_linear(_linear(64, 128, 1).to(torch.bfloat16), Int4LinearMethod())
    names = set(dict(layer.named_buffers()))
    assert names == {"kernel_packed", "kernel_scales_and_zeros"}
    assert layer.weight_nbytes() == matrix_nbytes(
        "int4", 64, 128, dtype=torch.bfloat16, int4_layout="cpu_kernel"
    )


def test_reference_int4_layer_keeps_checkpoint_names_and_bytes() -> None:
    layer = QuantizedLinear.from_linear(_linear(64, 128, 2), Int4LinearMethod(use_kernels=False))
    state = layer.state_dict()
    assert set(state) == {"weight_packed", "weight_scale", "bias"}
    assert state["weight_packed"].dtype == torch.int32
    assert state["weight_packed"].shape == (64, 128 // 8)
    assert layer.weight_nbytes() == matrix_nbytes("int4", 64, 128) == 64 * 128 // 2 + 64 * 4 * 2


def test_fp8_storage_survives_model_casts_and_bias_follows() -> None:
    layer = QuantizedLinear.from_linear(_linear(40, 64, 3), Fp8LinearMethod())
    model = nn.Sequential(layer).to(torch.bfloat16)
    assert layer.weight.dtype == FP8_DTYPE
    assert layer.weight_scale_inv.dtype == torch.float32
    assert layer.bias is not None and layer.bias.dtype == torch.bfloat16
    y = model(torch.randn(2, 64, dtype=torch.bfloat16))
    assert y.dtype == torch.bfloat16 and y.shape == (2, 40)
    assert layer.weight_nbytes() == 40 * 64 + 4


def test_unquantized_method_is_plain_linear_and_follows_casts() -> None:
    linear = _linear(8, 16, 4)
    layer = QuantizedLinear.from_linear(linear, UnquantizedLinearMethod())
    x = torch.randn(3, 16)
    torch.testing.assert_close(layer(x), linear(x))
    layer.to(torch.bfloat16)
    assert layer.weight.dtype == torch.bfloat16 and layer.compute_dtype == torch.bfloat16


def test_repr_names_the_scheme() -> None:
    layer = QuantizedLinear.from_linear(_linear(16, 32, 5, bias=False), Fp8LinearMethod())
    assert "scheme=fp8" in repr(layer) and "bias=False" in repr(layer)
