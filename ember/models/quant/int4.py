"""Group-wise INT4 weights: the pure quantize / dequantize pair and the reference matmul.

Layout (``Int4Weight``), chosen so that it *is* the compressed-tensors ``pack-quantized`` layout
that Kimi K2.5/K2.6 and GLM W4A16/W4AFP8 checkpoints ship (``weight_packed`` int32 ``[N, K/8]``,
eight offset-coded nibbles per int32, lowest bits first), viewed as bytes:

- ``packed`` uint8 ``[N, K_pad/2]``: byte ``j`` holds column ``2j`` in its low nibble and
  ``2j+1`` in its high nibble; each nibble is ``u = q + 8`` for a signed ``q`` in ``[-8, 7]``.
  ``packed.view(torch.int32)`` is ``weight_packed`` bit for bit (little endian).
- ``scales`` ``[N, K_pad/group]`` (BF16 by default, ``weight_scale`` in the checkpoint).
- ``zeros`` ``[N, K_pad/group]`` or None: asymmetric groups add a zero in the *float* domain,
  ``w = q * scale + zero``, which is the convention PyTorch's CPU int4 kernel (tinygemm) uses.

``w = (u - 8) * scale (+ zero)``. ``K`` is zero-padded up to a multiple of ``group`` (the padded
columns dequantize to exactly 0, so padding the activations with zeros is harmless).

Symmetric is the default: it is what Kimi's native INT4 (QAT, g32) and GLM-5.3-W4A8 (g128) ship,
it costs 4 + 16/g bits per weight (4.5 at g32), and a real checkpoint loads without conversion.
Asymmetric costs 4 + 32/g bits and lowers round-trip error on groups that are not centred on zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ember.errors import ConfigError
from ember.models.quant_options import INT4_GROUP_SIZES

_QMIN, _QMAX = -8, 7
_OFFSET = 8
# Symmetric scale: the largest magnitude maps to 7.5 steps, so the grid spans [-8, 7] with both
# ends used (round-half-even sends -7.5 to -8, and +7.5 clamps to 7): max error is scale/2.
_SYMMETRIC_STEPS = 7.5
_MIN_SCALE = 1e-10  # an all-zero group still gets a finite, positive scale


@dataclass(frozen=True, slots=True)
class Int4Weight:
    """One ``[out_features, in_features]`` matrix in group-wise INT4 (see the module docstring)."""

    packed: torch.Tensor  # uint8 [N, K_pad // 2]
    scales: torch.Tensor  # [N, K_pad // group]
    zeros: torch.Tensor | None  # [N, K_pad // group] (asymmetric) or None (symmetric)
    in_features: int  # K before padding
    group_size: int

    @property
    def out_features(self) -> int:
        return int(self.packed.shape[0])

    @property
    def padded_in_features(self) -> int:
        return int(self.packed.shape[1]) * 2

    @property
    def symmetric(self) -> bool:
        return self.zeros is None

    def nbytes(self) -> int:
        """Bytes as stored (packed nibbles + scales + zeros): what a checkpoint holds."""
        total = self.packed.numel() * self.packed.element_size()
        total += self.scales.numel() * self.scales.element_size()
        if self.zeros is not None:
            total += self.zeros.numel() * self.zeros.element_size()
        return total


def check_group_size(group_size: int) -> None:
    """Reject group sizes the kernels and checkpoints do not use."""
    if group_size not in INT4_GROUP_SIZES:
        allowed = ", ".join(map(str, INT4_GROUP_SIZES))
        raise ConfigError("quantization", "group_size", group_size, f"one of {allowed}")


def pack_nibbles(unsigned: torch.Tensor) -> torch.Tensor:
    """uint8/int ``[N, K]`` values in 0..15 (K even) -> uint8 ``[N, K/2]``, low nibble first."""
    u = unsigned.to(torch.uint8)
    return (u[:, 0::2] | (u[:, 1::2] << 4)).contiguous()


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """uint8 ``[N, K/2]`` -> uint8 ``[N, K]`` in 0..15 (the inverse of ``pack_nibbles``)."""
    low = packed & 0x0F
    high = packed >> 4
    return torch.stack((low, high), dim=-1).reshape(packed.shape[0], -1)


def quantize_int4(
    weight: torch.Tensor,
    group_size: int = 32,
    *,
    symmetric: bool = True,
    scale_dtype: torch.dtype = torch.bfloat16,
) -> Int4Weight:
    """Round-to-nearest group-wise INT4 of a ``[N, K]`` weight (any float dtype).

    The scales (and zeros) are rounded to ``scale_dtype`` *before* the integers are chosen, so
    the stored values are the ones the integers were fitted to.
    """
    check_group_size(group_size)
    if weight.dim() != 2:
        raise ValueError(f"expected a 2-D weight, got shape {tuple(weight.shape)}")
    n, k = weight.shape
    w = weight.detach().float()
    k_pad = -(-k // group_size) * group_size
    if k_pad != k:
        w = F.pad(w, (0, k_pad - k))
    groups = w.view(n, k_pad // group_size, group_size)
    if symmetric:
        amax = groups.abs().amax(dim=-1)
        scales = _round_up(amax / _SYMMETRIC_STEPS, scale_dtype)
        q = torch.round(groups / scales.float().unsqueeze(-1)).clamp_(_QMIN, _QMAX)
        zeros = None
    else:
        lo = groups.amin(dim=-1)
        hi = groups.amax(dim=-1)
        scales = _round_up((hi - lo) / (_QMAX - _QMIN), scale_dtype)
        # zero is the value of q = 0, i.e. u = 8: lo sits at q = -8.
        zeros = (lo + _OFFSET * scales.float()).to(scale_dtype)
        shifted = groups - zeros.float().unsqueeze(-1)
        q = torch.round(shifted / scales.float().unsqueeze(-1)).clamp_(_QMIN, _QMAX)
    unsigned = (q + _OFFSET).to(torch.uint8).view(n, k_pad)
    return Int4Weight(pack_nibbles(unsigned), scales.contiguous(), zeros, k, group_size)


def _round_up(scales: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Cast positive float32 scales to ``dtype`` rounding *up*, so the grid still spans the group
    (rounding down would push the extreme value past the last level and break the half-step
    error bound)."""
    exact = scales.clamp_min(_MIN_SCALE)
    cast = exact.to(dtype)
    too_small = cast.float() < exact
    bigger = torch.nextafter(cast, torch.full_like(cast, float("inf")))
    return torch.where(too_small, bigger, cast)


def dequantize_int4(qweight: Int4Weight, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``Int4Weight`` -> dense ``[N, K]`` in ``dtype`` (computed in float32, then cast)."""
    n, g = qweight.out_features, qweight.group_size
    q = unpack_nibbles(qweight.packed).float() - _OFFSET  # [N, K_pad]
    groups = q.view(n, -1, g) * qweight.scales.float().unsqueeze(-1)
    if qweight.zeros is not None:
        groups = groups + qweight.zeros.float().unsqueeze(-1)
    return groups.view(n, -1)[:, : qweight.in_features].to(dtype)


def int4_linear_reference(
    x: torch.Tensor, qweight: Int4Weight, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """The slow reference: dequantize everything to float32, ``F.linear``, cast back."""
    w = dequantize_int4(qweight, torch.float32)
    b = bias.float() if bias is not None else None
    return F.linear(x.float(), w, b).to(x.dtype)


def int4_from_signed(
    q: torch.Tensor,
    scales: torch.Tensor,
    zeros: torch.Tensor | None,
    in_features: int,
    group_size: int,
) -> Int4Weight:
    """An ``Int4Weight`` from signed integers ``q`` ``[N, K_pad]`` in [-8, 7] (tests, loaders)."""
    if int(q.min()) < _QMIN or int(q.max()) > _QMAX:
        raise ValueError("signed int4 values must lie in [-8, 7]")
    return Int4Weight(pack_nibbles(q + _OFFSET), scales, zeros, in_features, group_size)
