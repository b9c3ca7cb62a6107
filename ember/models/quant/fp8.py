"""Block-wise FP8 (e4m3) weights as DeepSeek-V3 / Kimi / GLM FP8 checkpoints store them.

A ``[N, K]`` weight is cut into ``128 x 128`` blocks (the last ones partial when N or K is not a
multiple); each block keeps one float32 ``weight_scale_inv`` = ``amax(block) / 448`` (the name is
the checkpoints': despite "inv" it is the factor that *multiplies* the FP8 values back), and its
values as ``float8_e4m3fn``: ``w = fp8 * scale_inv``. Cost: 8 + 32/16384 = 8.002 bits/weight.

CPU compute (measured, bench/quant.py): torch 2.13 has no CPU kernel that multiplies FP8 weights
without materialising them: ``torch._scaled_mm`` on CPU also quantizes the *activations* to FP8
(W8A8, different numerics) and, in a one-off probe (not in the bench), ran some 400x slower than
a BF16 matmul on a 2048 x 6144 weight at batch 1; an int8 detour is lossy.
So the fast path dequantizes the whole matrix to the activation dtype on every call; the e4m3 ->
bf16 conversion dominates, done here with integer bit moves (exact, faster than ``Tensor.to``,
which converts element by element; a 256-entry lookup table was no faster). A ``torch.compile``d
dequantization is up to 5x faster still on large matrices (bench/quant.py) but needs a C
compiler at run time, seconds of compiling per weight shape, and dynamo's per-function recompile
limit (8) is below the number of distinct shapes of a GLM-5 layer stack, so it is measured, not
used. On CPU, FP8 weights save
memory and checkpoint bytes, not time; INT4 (with a real kernel) or BF16 compute faster.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

FP8_DTYPE = torch.float8_e4m3fn
FP8_E4M3_MAX = 448.0
DEFAULT_FP8_BLOCK = (128, 128)
_MIN_SCALE = 1e-12


@dataclass(frozen=True, slots=True)
class Fp8BlockWeight:
    """One ``[N, K]`` matrix in block-scaled FP8."""

    qweight: torch.Tensor  # float8_e4m3fn [N, K]
    scale_inv: torch.Tensor  # float32 [ceil(N / block_n), ceil(K / block_k)]
    block_size: tuple[int, int] = DEFAULT_FP8_BLOCK

    @property
    def out_features(self) -> int:
        return int(self.qweight.shape[0])

    @property
    def in_features(self) -> int:
        return int(self.qweight.shape[1])

    def nbytes(self) -> int:
        """FP8 values plus the scale bytes."""
        return self.qweight.numel() + self.scale_inv.numel() * self.scale_inv.element_size()


def block_grid(n: int, k: int, block_size: tuple[int, int]) -> tuple[int, int]:
    """Number of (row, column) blocks covering an ``[n, k]`` matrix."""
    bn, bk = block_size
    return -(-n // bn), -(-k // bk)


def quantize_fp8_block(
    weight: torch.Tensor, block_size: tuple[int, int] = DEFAULT_FP8_BLOCK
) -> Fp8BlockWeight:
    """Round-to-nearest e4m3 with one scale per block (``amax / 448``), as DeepSeek's tools do."""
    if weight.dim() != 2:
        raise ValueError(f"expected a 2-D weight, got shape {tuple(weight.shape)}")
    n, k = weight.shape
    bn, bk = block_size
    rows, cols = block_grid(n, k, block_size)
    w = weight.detach().float()
    padded = F.pad(w, (0, cols * bk - k, 0, rows * bn - n))
    blocks = padded.view(rows, bn, cols, bk)
    amax = blocks.abs().amax(dim=(1, 3))  # [rows, cols]
    scale_inv = (amax / FP8_E4M3_MAX).clamp_min(_MIN_SCALE)
    scaled = blocks / scale_inv[:, None, :, None]
    q = scaled.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(FP8_DTYPE)
    q = q.view(rows * bn, cols * bk)[:n, :k].contiguous()
    return Fp8BlockWeight(q, scale_inv.contiguous(), block_size)


def expand_block_scales(fp8: Fp8BlockWeight) -> torch.Tensor:
    """The per-element scale ``[N, K]`` (float32): each block's scale repeated over the block."""
    bn, bk = fp8.block_size
    full = fp8.scale_inv.repeat_interleave(bn, dim=0).repeat_interleave(bk, dim=1)
    return full[: fp8.out_features, : fp8.in_features]


def dequantize_fp8_block(fp8: Fp8BlockWeight, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Reference dequantization: float32 values times the expanded scales, then cast."""
    return (fp8.qweight.float() * expand_block_scales(fp8)).to(dtype)


def fp8_linear_reference(
    x: torch.Tensor, fp8: Fp8BlockWeight, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """The slow reference: dequantize to float32, ``F.linear`` in float32, cast back."""
    b = bias.float() if bias is not None else None
    return F.linear(x.float(), dequantize_fp8_block(fp8), b).to(x.dtype)


# e4m3 -> bf16 by moving bits: the 7 magnitude bits shifted left by 4 land in bf16's exponent and
# mantissa fields, read with exponent bias 127 instead of 7, i.e. the value times 2^-120 (e4m3
# subnormals become bf16 subnormals, still exact); the block scale then carries the 2^120.
# Exact, and 1.6-4.5x faster than Tensor.to(), which converts element by element (bench/quant.py).
_BIAS_SHIFT = 2.0**120
_MAX_SHIFTED_SCALE = 2.0**7  # scale * 2^120 must stay below bf16's largest finite (~2^128)


def _fp8_bits_as_bf16(qweight: torch.Tensor) -> torch.Tensor:
    """float8_e4m3fn -> bfloat16 holding value * 2^-120 (no NaN handling: we never store NaN)."""
    signed = qweight.view(torch.int8).to(torch.int16)  # sign-extended: negative -> bit 15 set
    bits = (signed & 0x7F) << 4
    return bits.bitwise_or_(signed & -0x8000).view(torch.bfloat16)


def dequantize_fp8_block_fast(fp8: Fp8BlockWeight, dtype: torch.dtype) -> torch.Tensor:
    """Convert straight to ``dtype`` and scale in place, one block row at a time (no [N, K] scale
    tensor, no float32 copy)."""
    bn, bk = fp8.block_size
    n, k = fp8.out_features, fp8.in_features
    scales = fp8.scale_inv
    if dtype == torch.bfloat16 and float(scales.max()) < _MAX_SHIFTED_SCALE:
        w = _fp8_bits_as_bf16(fp8.qweight)
        scales = scales * _BIAS_SHIFT
    else:
        w = fp8.qweight.to(dtype)
    # Column scales for each block row: [rows, K] (small: N / 128 rows).
    col_scales = scales.to(dtype).repeat_interleave(bk, dim=1)[:, :k]
    full_rows = n // bn
    if full_rows:
        w[: full_rows * bn].view(full_rows, bn, k).mul_(col_scales[:full_rows, None, :])
    if full_rows * bn != n:
        w[full_rows * bn :].mul_(col_scales[full_rows])
    return w


def fp8_linear(
    x: torch.Tensor, fp8: Fp8BlockWeight, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """CPU fast path: dequantize on the fly into ``x.dtype``, then ``F.linear`` (see module doc)."""
    w = dequantize_fp8_block_fast(fp8, x.dtype)
    return F.linear(x, w, bias.to(x.dtype) if bias is not None else None)
