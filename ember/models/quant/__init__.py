"""Weight quantization: BF16 (dense), block-scaled FP8 (e4m3, 128x128) and group-wise INT4.

Layers (each fast path has a reference beside it, compared by tests/models/quant):

- ``int4``: ``quantize_int4`` / ``dequantize_int4`` / ``int4_linear_reference``;
  ``int4_kernel``: PyTorch's CPU int4 pack + matmul behind ``prepare_int4_cpu_kernel`` (None when
  missing -> dequantize + ``F.linear``).
- ``fp8``: ``quantize_fp8_block`` / ``dequantize_fp8_block`` / ``fp8_linear_reference``;
  ``fp8_linear`` (dequantize on the fly; the only honest CPU option on torch 2.13).
- ``linear`` + ``methods``: ``QuantizedLinear`` and the ``LinearMethod`` seam.
- ``policy``: ``quantize_model(model, QuantConfig(...))`` (routed experts or all linear layers),
  ``model_weight_bytes``.
- ``checkpoint``: pre-quantized FP8 (``weight_scale_inv``) and compressed-tensors INT4
  (``weight_packed``/``weight_scale``) checkpoints.
- ``accounting``: bits per weight of each scheme, by formula.
"""

from __future__ import annotations

from ember.models.quant.accounting import bits_per_weight
from ember.models.quant.checkpoint import (
    CheckpointQuantization,
    load_quantized_linears,
    parse_checkpoint_quantization,
)
from ember.models.quant.config import QuantConfig
from ember.models.quant.linear import LinearMethod, QuantizedLinear, UnquantizedLinearMethod
from ember.models.quant.methods import Fp8LinearMethod, Int4LinearMethod, linear_method
from ember.models.quant.policy import (
    QuantizationReport,
    WeightBytes,
    model_weight_bytes,
    quantize_model,
    scheme_for,
)

__all__ = [
    "CheckpointQuantization",
    "Fp8LinearMethod",
    "Int4LinearMethod",
    "LinearMethod",
    "QuantConfig",
    "QuantizationReport",
    "QuantizedLinear",
    "UnquantizedLinearMethod",
    "WeightBytes",
    "bits_per_weight",
    "linear_method",
    "load_quantized_linears",
    "model_weight_bytes",
    "parse_checkpoint_quantization",
    "quantize_model",
    "scheme_for",
]
