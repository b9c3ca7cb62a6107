"""FP8 e4m3 KV quantization: the quantize/dequantize pair (style R12).

Granularity: one static float32 scale per (layer, component), e.g. layer 3's latent or layer 3's
rotary key. ``stored = fp8(x / scale)``, ``x ~= float(stored) * scale``. Values beyond the e4m3fn
range (+-448 after scaling) saturate; PyTorch's cast saturates, so no separate clamp is needed.
The default scale is 1.0 (SGLang's default when a checkpoint carries no ``k_scale``/``v_scale``);
``scale_from_amax`` turns a calibration maximum into a scale with headroom.

The attention backend never multiplies whole caches by scales: it folds them into the query
(``q * scale`` before the dot product) and into the output (``(p @ v) * scale``), so reading FP8
costs one dtype conversion of the gathered rows and nothing else.
"""

from __future__ import annotations

import torch

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8_DTYPE).max)  # 448.0


def quantize_fp8(x: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """``x / scale`` cast to float8_e4m3fn (saturating at +-448)."""
    if isinstance(scale, float) and scale == 1.0:
        return x.to(FP8_DTYPE)
    return (x.float() / scale).to(FP8_DTYPE)


def dequantize_fp8(
    q: torch.Tensor, scale: float | torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The reference inverse of ``quantize_fp8``: ``float(q) * scale`` in ``dtype``."""
    return (q.to(torch.float32) * scale).to(dtype)


def fp8_lut(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The 256 values of float8_e4m3fn by bit pattern (NaN patterns read as 0)."""
    table = torch.arange(256, dtype=torch.int64).to(torch.uint8).view(FP8_DTYPE).to(torch.float32)
    return torch.nan_to_num(table, nan=0.0).to(dtype)


def dequantize_fp8_lut(
    raw: torch.Tensor, lut: torch.Tensor, index: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    """Fast unscaled dequantization: ``out = lut[raw]`` through a 256-entry table.

    PyTorch's own float8 -> float cast runs element by element on CPU (about 6 ns per value on
    our 2-core machines); a table lookup via ``index_select`` is about four times faster. ``raw``
    is float8 or uint8 of any shape; ``index`` (int32) and ``out`` (``lut.dtype``) are scratch
    buffers with ``raw.numel()`` elements. Exact: equals ``dequantize_fp8(raw, 1.0)``.
    """
    flat = raw.reshape(-1).view(torch.uint8)
    index.copy_(flat)
    torch.index_select(lut, 0, index, out=out.view(-1))
    return out.view(raw.shape)


def scale_from_amax(amax: float, headroom: float = 2.0) -> float:
    """A static scale that maps ``amax * headroom`` to the top of the e4m3 range.

    Headroom leaves room for activations larger than the calibration saw; a zero or tiny amax
    falls back to 1.0 rather than a scale that would overflow everything else.
    """
    if not amax > 1e-6:
        return 1.0
    return amax * headroom / FP8_MAX
