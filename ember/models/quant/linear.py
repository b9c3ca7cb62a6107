"""The seam between model code and weight formats: ``QuantizedLinear`` + ``LinearMethod``.

As in SGLang/vLLM (``LinearMethodBase``): a *method* is a stateless strategy chosen by config; the
*layer* owns the tensors (registered buffers named as checkpoints name them, so a state dict of a
pre-quantized checkpoint loads by name). The life of a layer:

1. ``method.create_weights(layer)``: register empty storage of the right shapes and dtypes;
2. fill it: ``method.load_dense(layer, w)`` quantizes a dense weight, or the loader copies
   checkpoint tensors in (``checkpoint.py``);
3. ``method.process_weights_after_loading(layer)``: repack for a kernel (INT4 on CPU);
4. ``layer(x)`` = ``method.apply(layer, x)``.

A ``QuantizedLinear`` is a drop-in replacement for ``nn.Linear`` in forward (``x @ W.T + b``). It
does not expose a dense ``.weight`` for quantized schemes (FP8's ``weight`` buffer holds raw e4m3
values): code that reads weights directly must call ``dequantized_weight()``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class LinearMethod(ABC):
    """How one linear layer stores and applies its weight (stateless; state lives on the layer)."""

    @property
    @abstractmethod
    def scheme(self) -> str:
        """``none``, ``fp8`` or ``int4``."""

    @abstractmethod
    def create_weights(self, layer: QuantizedLinear) -> None:
        """Register the layer's empty weight storage (on the default device)."""

    @abstractmethod
    def load_dense(self, layer: QuantizedLinear, weight: torch.Tensor) -> None:
        """Quantize a dense ``[out, in]`` weight into the layer's storage."""

    def process_weights_after_loading(self, layer: QuantizedLinear) -> None:  # noqa: B027
        """Repack the loaded storage for the fast path (default: nothing to do)."""

    @abstractmethod
    def apply(self, layer: QuantizedLinear, x: torch.Tensor) -> torch.Tensor:
        """``x @ W.T + bias`` on the fast path."""

    @abstractmethod
    def dequantize(self, layer: QuantizedLinear, dtype: torch.dtype) -> torch.Tensor:
        """The dense ``[out, in]`` weight (slow; for code that needs the matrix itself)."""


class UnquantizedLinearMethod(LinearMethod):
    """Plain dense weights (BF16/FP32): ``F.linear``."""

    @property
    def scheme(self) -> str:
        return "none"

    def create_weights(self, layer: QuantizedLinear) -> None:
        empty = torch.empty(layer.out_features, layer.in_features, dtype=layer.compute_dtype)
        layer.register_parameter("weight", nn.Parameter(empty, requires_grad=False))

    def load_dense(self, layer: QuantizedLinear, weight: torch.Tensor) -> None:
        layer.weight.data = weight.detach().to(layer.compute_dtype).contiguous()

    def apply(self, layer: QuantizedLinear, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, layer.weight, layer.bias)

    def dequantize(self, layer: QuantizedLinear, dtype: torch.dtype) -> torch.Tensor:
        return layer.weight.to(dtype)


class QuantizedLinear(nn.Module):
    """A linear layer whose weight storage and matmul belong to a ``LinearMethod``."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        method: LinearMethod,
        *,
        bias: bool = False,
        compute_dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.method = method
        self.compute_dtype = compute_dtype
        method.create_weights(self)
        if bias:
            empty = torch.zeros(out_features, dtype=compute_dtype)
            self.bias: nn.Parameter | None = nn.Parameter(empty, requires_grad=False)
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_linear(cls, linear: nn.Linear, method: LinearMethod) -> QuantizedLinear:
        """Quantize an ``nn.Linear`` (on its device, computing in its dtype)."""
        weight = linear.weight.detach()
        return cls.from_dense(weight, linear.bias, method, compute_dtype=weight.dtype)

    @classmethod
    def from_dense(
        cls,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        method: LinearMethod,
        *,
        compute_dtype: torch.dtype,
    ) -> QuantizedLinear:
        """Quantize a dense ``[out, in]`` weight (any float dtype; float32 keeps FP8->INT4
        requantization free of an extra rounding) and prepare the layer for the fast path."""
        out_features, in_features = weight.shape
        with torch.device(weight.device):
            layer = cls(
                in_features,
                out_features,
                method,
                bias=bias is not None,
                compute_dtype=compute_dtype,
            )
        method.load_dense(layer, weight.detach())
        if bias is not None and layer.bias is not None:
            layer.bias.data = bias.detach().to(compute_dtype).clone()
        method.process_weights_after_loading(layer)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.method.apply(self, x)

    def dequantized_weight(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The dense ``[out, in]`` weight; dequantizes the whole matrix on every call."""
        return self.method.dequantize(self, dtype or self.compute_dtype)

    def weight_nbytes(self) -> int:
        """Resident bytes of the weight storage (bias excluded): what this layer costs in memory."""
        return sum(
            t.numel() * t.element_size() for name, t in self.named_buffers(recurse=False)
        ) + sum(
            p.numel() * p.element_size()
            for name, p in self.named_parameters(recurse=False)
            if name != "bias"
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"scheme={self.method.scheme}, bias={self.bias is not None}"
        )

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> nn.Module:
        # model.to(bfloat16) must not cast FP8 values or INT4 scales as if they were weights
        # (float8 counts as floating point to torch). Device moves still apply. Dense weights and
        # the bias follow the cast, and so does compute_dtype.
        if self.method.scheme == "none":
            result = super()._apply(fn, recurse)
            self.compute_dtype = self.weight.dtype
            return result

        def keep_dtype(t: torch.Tensor) -> torch.Tensor:
            moved = fn(t)
            return moved if moved.dtype == t.dtype else t.to(device=moved.device)

        storage = dict(self.named_buffers(recurse=False))
        for name, tensor in storage.items():
            self._buffers[name] = keep_dtype(tensor)
        if self.bias is not None:
            self.bias.data = fn(self.bias.data)
        return self
