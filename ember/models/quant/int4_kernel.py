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

Which dtype the kernel runs in (``int4_kernel_dtype``): on x86, ATen's ``int4mm_kernel.cpp``
(``aten/src/ATen/native/cpu/int4mm_kernel.cpp``) has AVX2 and AVX512 ``tinygemm_kernel``
specialisations for ``BFloat16`` only (BF16 activations and scales, fp32 FMAs, BF16 output);
``Half`` and ``float`` take its generic per-element loop. Measured on torch 2.13.0, AMD EPYC
with AVX2, one thread, the tiny checkpoints' shapes: an expert's 256 -> 128 at 16 rows took
1.06 ms in float32 and 1.10 ms in float16 against 0.05 ms in BF16 (2-12x at one row, 20-90x at
16-64 rows), far slower than the dense float32 ``F.linear`` it replaces. So on an AVX2/AVX512
CPU the kernel always runs in BF16: activations are rounded to BF16 on the way in and the output
cast back to the compute dtype (8 significant bits on each; scales are BF16 already unless a
float32 ``scale_dtype`` was asked for). On aarch64 the file has a NEON kernel for all three
dtypes, and a CPU that ATen dispatches as ``DEFAULT`` runs the generic loop for all three (BF16
was no faster there: ``ATEN_CPU_CAPABILITY=default``), so elsewhere the kernel keeps the compute
dtype.
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
# ATen CPU capabilities whose int4mm kernel is vectorised for BF16 only (see the module docstring).
_BF16_ONLY_CAPABILITIES = ("AVX2", "AVX512")


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


def cpu_capability() -> str:
    """The ISA ATen dispatches its CPU kernels for here (``AVX2``, ``AVX512``, ``DEFAULT``...)."""
    return torch.backends.cpu.get_cpu_capability()


def int4_kernel_dtype(compute_dtype: torch.dtype, capability: str | None = None) -> torch.dtype:
    """The activation dtype to run the CPU INT4 kernel in for a layer computing in
    ``compute_dtype``: BF16 where the kernel is vectorised only for BF16 (x86 AVX2/AVX512),
    else ``compute_dtype`` itself. ``capability`` overrides the probe (a test seam)."""
    if compute_dtype not in _KERNEL_DTYPES:
        return compute_dtype  # float64 and others: no kernel at all, the fallback keeps them
    if (capability or cpu_capability()) in _BF16_ONLY_CAPABILITIES:
        return torch.bfloat16
    return compute_dtype


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
    # Back to the caller's dtype first, so a float32 layer adds its bias in float32.
    out = out.reshape(*lead, kernel.out_features).to(x.dtype)
    return out if bias is None else out + bias.to(x.dtype)


def dequantize_int4_cpu_kernel(kernel: Int4CpuKernelWeight, dtype: torch.dtype) -> torch.Tensor:
    """The dense ``[N, K]`` weight of a kernel-packed matrix, exactly as ``dequantize_int4``
    computes it (in float32, then cast to ``dtype``), whatever dtype the kernel runs in.

    The packed layout is opaque, so the integers are read back by multiplying the identity
    through the kernel with unit scales and zero zeros: each output is one ``q`` in [-8, 7],
    exact in BF16. The real scales and zeros are then applied here in float32 (the kernel's own
    BF16 output would round ``q * scale`` to 8 significant bits)."""
    groups, n_pad, _ = kernel.scales_and_zeros.shape
    unit = torch.zeros(groups, n_pad, 2, dtype=torch.bfloat16, device=kernel.packed.device)
    unit[..., 0] = 1.0
    eye = torch.eye(kernel.padded_in_features, dtype=torch.bfloat16, device=kernel.packed.device)
    q = getattr(torch.ops.aten, _MATMUL)(eye, kernel.packed, kernel.group_size, unit)
    q = q[:, : kernel.out_features].t().float()  # [N, K_pad]
    scales_and_zeros = kernel.scales_and_zeros[:, : kernel.out_features].float()
    scales = scales_and_zeros[..., 0].t().unsqueeze(-1)  # [N, groups, 1]
    zeros = scales_and_zeros[..., 1].t().unsqueeze(-1)
    n, g = kernel.out_features, kernel.group_size
    w = q.view(n, groups, g) * scales + zeros
    return w.view(n, -1)[:, : kernel.in_features].to(dtype)


def int4_linear_fallback(
    x: torch.Tensor, qweight: Int4Weight, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Where the kernel is unavailable: dequantize to ``x.dtype`` every call, then ``F.linear``."""
    w = dequantize_int4(qweight, x.dtype)
    return F.linear(x, w, bias.to(x.dtype) if bias is not None else None)
