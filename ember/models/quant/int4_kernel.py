"""PyTorch's CPU INT4 kernel (tinygemm layout) behind one feature check.

torch >= 2.6 ships ``aten::_convert_weight_to_int4pack_for_cpu(int32 [N, K] in 0..15, innerKTiles)``
and ``aten::_weight_int4pack_mm_for_cpu(x [M, K], packed, groupSize, scaleAndZeros [K/g, N, 2])``,
computing ``x @ ((u - 8) * scale + zero).T`` (measured on torch 2.13: the zero is in the float
domain, so a symmetric ``Int4Weight`` is ``zero = 0``). Constraints found by probing torch 2.13.0:
``N % 16 == 0`` (we pad rows with zero weights and slice the output), group size in
{32, 64, 128, 256}, ``K % group == 0`` (``Int4Weight`` already pads K), activations and
``scaleAndZeros`` in the same dtype (bf16, fp16 or fp32).

Cost of the layout: the kernel always reads a zero per group, so a symmetric g32 matrix takes
4 + 32/32 = 5 bits/weight resident (vs 4.5 in the checkpoint); ``Int4CpuKernelWeight.nbytes``
says so.

If the ops are missing (another torch, another device) ``prepare_int4_cpu_kernel`` returns None and
the caller falls back to dequantize + ``F.linear`` (``int4_linear_fallback``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ember.models.quant.int4 import Int4Weight, dequantize_int4, unpack_nibbles

_CONVERT = "_convert_weight_to_int4pack_for_cpu"
_MATMUL = "_weight_int4pack_mm_for_cpu"
_KERNEL_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_KERNEL_GROUPS = (32, 64, 128, 256)
_ROW_MULTIPLE = 16
_INNER_K_TILES = 2  # ignored by the CPU kernel on 2.13 (any of 1/2/4/8 gives equal results)


@dataclass(frozen=True, slots=True)
class Int4CpuKernelWeight:
    """An ``Int4Weight`` repacked for ``_weight_int4pack_mm_for_cpu``."""

    packed: torch.Tensor  # the kernel's opaque uint8 layout, [N_pad, K_pad / 2]
    scales_and_zeros: torch.Tensor  # [K_pad / group, N_pad, 2] in ``dtype``
    out_features: int
    in_features: int
    padded_in_features: int
    group_size: int
    dtype: torch.dtype

    def nbytes(self) -> int:
        """Resident bytes (packed weights + scales + zeros, padding included)."""
        return (
            self.packed.numel() * self.packed.element_size()
            + self.scales_and_zeros.numel() * self.scales_and_zeros.element_size()
        )


def cpu_int4_kernel_available() -> bool:
    """Whether this torch has both CPU INT4 ops (checked at call time, never at import)."""
    ops = torch.ops.aten
    try:
        convert, matmul = getattr(ops, _CONVERT), getattr(ops, _MATMUL)
    except (AttributeError, RuntimeError):
        return False
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    return all(has_kernel(op.default.name(), "CPU") for op in (convert, matmul))


def prepare_int4_cpu_kernel(qweight: Int4Weight, dtype: torch.dtype) -> Int4CpuKernelWeight | None:
    """Repack ``qweight`` for the CPU kernel, or None when the kernel cannot run it."""
    if (
        qweight.packed.device.type != "cpu"
        or dtype not in _KERNEL_DTYPES
        or qweight.group_size not in _KERNEL_GROUPS
        or not cpu_int4_kernel_available()
    ):
        return None
    n = qweight.out_features
    n_pad = -(-n // _ROW_MULTIPLE) * _ROW_MULTIPLE
    unsigned = unpack_nibbles(qweight.packed).to(torch.int32)  # [N, K_pad] in 0..15
    scales = qweight.scales.to(dtype)
    zeros = qweight.zeros.to(dtype) if qweight.zeros is not None else torch.zeros_like(scales)
    if n_pad != n:
        # Extra rows: u = 8 with scale 0 and zero 0 dequantize to exactly 0.
        unsigned = F.pad(unsigned, (0, 0, 0, n_pad - n), value=8)
        scales = F.pad(scales, (0, 0, 0, n_pad - n))
        zeros = F.pad(zeros, (0, 0, 0, n_pad - n))
    packed = getattr(torch.ops.aten, _CONVERT)(unsigned.contiguous(), _INNER_K_TILES)
    scales_and_zeros = torch.stack((scales.t(), zeros.t()), dim=-1).contiguous()
    return Int4CpuKernelWeight(
        packed=packed,
        scales_and_zeros=scales_and_zeros,
        out_features=n,
        in_features=qweight.in_features,
        padded_in_features=qweight.padded_in_features,
        group_size=qweight.group_size,
        dtype=dtype,
    )


def int4_cpu_kernel_linear(
    x: torch.Tensor, kernel: Int4CpuKernelWeight, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """``F.linear(x, W)`` for a kernel-packed INT4 ``W``; ``x`` is ``[..., in_features]``."""
    lead = x.shape[:-1]
    flat = x.reshape(-1, x.shape[-1]).to(kernel.dtype)
    if kernel.padded_in_features != kernel.in_features:
        flat = F.pad(flat, (0, kernel.padded_in_features - kernel.in_features))
    if flat.shape[0] == 0:
        out = flat.new_zeros(0, kernel.out_features)
    else:
        out = getattr(torch.ops.aten, _MATMUL)(
            flat.contiguous(), kernel.packed, kernel.group_size, kernel.scales_and_zeros
        )
        if out.shape[1] != kernel.out_features:
            out = out[:, : kernel.out_features]
    if bias is not None:
        out = out + bias.to(out.dtype)
    return out.reshape(*lead, kernel.out_features).to(x.dtype)


def int4_linear_fallback(
    x: torch.Tensor, qweight: Int4Weight, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Where the kernel is unavailable: dequantize to ``x.dtype`` every call, then ``F.linear``."""
    w = dequantize_int4(qweight, x.dtype)
    return F.linear(x, w, bias.to(x.dtype) if bias is not None else None)
