"""The FP8 and INT4 ``LinearMethod``s, and ``linear_method`` to pick one by scheme.

Buffer names follow the checkpoints so pre-quantized weights load by name:

- FP8 (DeepSeek/GLM FP8): ``weight`` float8_e4m3fn ``[N, K]``, ``weight_scale_inv`` float32 blocks.
- INT4 (compressed-tensors ``pack-quantized``): ``weight_packed`` int32 ``[N, K_pad/8]``,
  ``weight_scale`` ``[N, K_pad/g]``, plus ``weight_zero`` (ours: float zeros) when asymmetric.
  After ``process_weights_after_loading`` on CPU they become ``kernel_packed`` and
  ``kernel_scales_and_zeros`` (the tinygemm layout); the checkpoint-layout buffers are dropped so
  the matrix is held once.
"""

from __future__ import annotations

import torch

from ember.models.quant.config import QuantConfig
from ember.models.quant.fp8 import (
    FP8_DTYPE,
    Fp8BlockWeight,
    block_grid,
    dequantize_fp8_block,
    fp8_linear,
    fp8_linear_reference,
    quantize_fp8_block,
)
from ember.models.quant.int4 import (
    Int4Weight,
    dequantize_int4,
    int4_linear_reference,
    quantize_int4,
)
from ember.models.quant.int4_kernel import (
    Int4CpuKernelWeight,
    dequantize_int4_cpu_kernel,
    int4_cpu_kernel_linear,
    int4_kernel_dtype,
    int4_linear_fallback,
    prepare_int4_cpu_kernel,
)
from ember.models.quant.linear import LinearMethod, QuantizedLinear, UnquantizedLinearMethod


class Fp8LinearMethod(LinearMethod):
    """Block-scaled FP8 weights; dequantize-on-the-fly on CPU (see fp8.py for why)."""

    def __init__(self, block_size: tuple[int, int] = (128, 128), *, use_kernels: bool = True):
        self.block_size = block_size
        self.use_kernels = use_kernels

    @property
    def scheme(self) -> str:
        return "fp8"

    def create_weights(self, layer: QuantizedLinear) -> None:
        n, k = layer.out_features, layer.in_features
        layer.register_buffer("weight", torch.empty(n, k, dtype=FP8_DTYPE))
        grid = block_grid(n, k, self.block_size)
        layer.register_buffer("weight_scale_inv", torch.empty(grid, dtype=torch.float32))

    def load_dense(self, layer: QuantizedLinear, weight: torch.Tensor) -> None:
        fp8 = quantize_fp8_block(weight, self.block_size)
        layer.weight = fp8.qweight
        layer.weight_scale_inv = fp8.scale_inv

    def weights(self, layer: QuantizedLinear) -> Fp8BlockWeight:
        return Fp8BlockWeight(layer.weight, layer.weight_scale_inv, self.block_size)

    def apply(self, layer: QuantizedLinear, x: torch.Tensor) -> torch.Tensor:
        fp8 = self.weights(layer)
        if self.use_kernels:
            return fp8_linear(x, fp8, layer.bias)
        return fp8_linear_reference(x, fp8, layer.bias)

    def dequantize(self, layer: QuantizedLinear, dtype: torch.dtype) -> torch.Tensor:
        return dequantize_fp8_block(self.weights(layer), dtype)


class Int4LinearMethod(LinearMethod):
    """Group-wise INT4 weights; PyTorch's CPU int4 kernel when present, else dequantize.

    The kernel runs in ``kernel_dtype``, or by default in ``int4_kernel_dtype(compute dtype)``:
    BF16 on x86, where it is vectorised for nothing else, with the activations cast in and the
    output cast back, so the layer still takes and returns its compute dtype."""

    def __init__(
        self,
        group_size: int = 32,
        *,
        symmetric: bool = True,
        scale_dtype: torch.dtype = torch.bfloat16,
        use_kernels: bool = True,
        kernel_dtype: torch.dtype | None = None,
    ) -> None:
        self.group_size = group_size
        self.symmetric = symmetric
        self.scale_dtype = scale_dtype
        self.use_kernels = use_kernels
        self.kernel_dtype = kernel_dtype

    @property
    def scheme(self) -> str:
        return "int4"

    def create_weights(self, layer: QuantizedLinear) -> None:
        n, k = layer.out_features, layer.in_features
        k_pad = -(-k // self.group_size) * self.group_size
        groups = k_pad // self.group_size
        layer.register_buffer("weight_packed", torch.empty(n, k_pad // 8, dtype=torch.int32))
        layer.register_buffer("weight_scale", torch.empty(n, groups, dtype=self.scale_dtype))
        if not self.symmetric:
            layer.register_buffer("weight_zero", torch.empty(n, groups, dtype=self.scale_dtype))

    def load_dense(self, layer: QuantizedLinear, weight: torch.Tensor) -> None:
        q = quantize_int4(
            weight, self.group_size, symmetric=self.symmetric, scale_dtype=self.scale_dtype
        )
        self.store(layer, q)

    def store(self, layer: QuantizedLinear, q: Int4Weight) -> None:
        """Put an ``Int4Weight`` into the layer's checkpoint-layout buffers."""
        layer.weight_packed = q.packed.view(torch.int32)
        layer.weight_scale = q.scales
        if q.zeros is not None:
            layer.weight_zero = q.zeros

    def weights(self, layer: QuantizedLinear) -> Int4Weight:
        """The checkpoint-layout weight (only before the kernel repack)."""
        zeros = layer.weight_zero if not self.symmetric else None
        packed = layer.weight_packed.view(torch.uint8)
        return Int4Weight(packed, layer.weight_scale, zeros, layer.in_features, self.group_size)

    def process_weights_after_loading(self, layer: QuantizedLinear) -> None:
        if not self.use_kernels or "kernel_packed" in layer._buffers:
            return
        dtype = self.kernel_dtype or int4_kernel_dtype(layer.compute_dtype)
        kernel = prepare_int4_cpu_kernel(self.weights(layer), dtype)
        if kernel is None:
            return  # no kernel here: apply() dequantizes (int4_linear_fallback)
        for name in ("weight_packed", "weight_scale", "weight_zero"):
            layer._buffers.pop(name, None)
        layer.register_buffer("kernel_packed", kernel.packed)
        layer.register_buffer("kernel_scales_and_zeros", kernel.scales_and_zeros)

    def kernel_weights(self, layer: QuantizedLinear) -> Int4CpuKernelWeight | None:
        if "kernel_packed" not in layer._buffers:
            return None
        if layer.kernel_packed.device.type != "cpu":
            raise RuntimeError(
                "this INT4 layer was packed for the CPU kernel and then moved to "
                f"{layer.kernel_packed.device}; move the model first, then quantize it"
            )
        k_pad = -(-layer.in_features // self.group_size) * self.group_size
        return Int4CpuKernelWeight(
            packed=layer.kernel_packed,
            scales_and_zeros=layer.kernel_scales_and_zeros,
            out_features=layer.out_features,
            in_features=layer.in_features,
            padded_in_features=k_pad,
            group_size=self.group_size,
            dtype=layer.kernel_scales_and_zeros.dtype,
        )

    def apply(self, layer: QuantizedLinear, x: torch.Tensor) -> torch.Tensor:
        kernel = self.kernel_weights(layer)
        if kernel is not None:
            return int4_cpu_kernel_linear(x, kernel, layer.bias)
        if self.use_kernels:
            return int4_linear_fallback(x, self.weights(layer), layer.bias)
        return int4_linear_reference(x, self.weights(layer), layer.bias)

    def dequantize(self, layer: QuantizedLinear, dtype: torch.dtype) -> torch.Tensor:
        kernel = self.kernel_weights(layer)
        if kernel is None:
            return dequantize_int4(self.weights(layer), dtype)
        return dequantize_int4_cpu_kernel(kernel, dtype)


def linear_method(scheme: str, config: QuantConfig) -> LinearMethod:
    """The method for ``scheme`` with ``config``'s options."""
    if scheme == "fp8":
        return Fp8LinearMethod(config.fp8_block, use_kernels=config.use_kernels)
    if scheme == "int4":
        return Int4LinearMethod(
            config.group_size,
            symmetric=config.symmetric,
            scale_dtype=config.scale_dtype,
            use_kernels=config.use_kernels,
            kernel_dtype=config.int4_kernel_dtype,
        )
    return UnquantizedLinearMethod()
