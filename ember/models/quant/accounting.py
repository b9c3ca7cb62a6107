"""Weight bytes of each scheme by formula, for capacity planning without building tensors.

``matrix_nbytes`` is exact for any ``[N, K]`` shape (padding included); tests check it against the
bytes the real quantized tensors occupy. Two INT4 layouts differ:

- ``checkpoint``: what ``Int4Weight`` and compressed-tensors files store: 4 bits + one scale per
  group (+ one zero when asymmetric): 4 + 16/32 = **4.5 bits/weight** at g32 with BF16 scales.
- ``cpu_kernel``: what PyTorch's CPU int4 kernel holds resident: it always keeps a scale *and*
  a zero per group, in the kernel's activation dtype (``int4_kernel_dtype``: BF16 on x86, even
  for a float32 model), and rows padded to a multiple of 16.
"""

from __future__ import annotations

from typing import Literal

import torch

Int4Layout = Literal["checkpoint", "cpu_kernel"]


def _bits(dtype: torch.dtype) -> int:
    return torch.finfo(dtype).bits


def matrix_nbytes(
    scheme: str,
    out_features: int,
    in_features: int,
    *,
    dtype: torch.dtype = torch.bfloat16,
    group_size: int = 32,
    symmetric: bool = True,
    scale_dtype: torch.dtype = torch.bfloat16,
    fp8_block: tuple[int, int] = (128, 128),
    int4_layout: Int4Layout = "checkpoint",
) -> int:
    """Exact bytes of one ``[out, in]`` weight matrix stored as ``scheme``.

    ``dtype`` is the dense dtype (``none``) or the INT4 kernel's activation dtype (its scales).
    """
    n, k = out_features, in_features
    if scheme == "none":
        return n * k * _bits(dtype) // 8
    if scheme == "fp8":
        rows, cols = -(-n // fp8_block[0]), -(-k // fp8_block[1])
        return n * k + rows * cols * 4
    if scheme == "int4":
        k_pad = -(-k // group_size) * group_size
        groups = k_pad // group_size
        if int4_layout == "cpu_kernel":
            n_pad = -(-n // 16) * 16
            return n_pad * k_pad // 2 + n_pad * groups * 2 * _bits(dtype) // 8
        per_group = (1 if symmetric else 2) * _bits(scale_dtype) // 8
        return n * k_pad // 2 + n * groups * per_group
    raise ValueError(f"unknown scheme {scheme!r}; expected none, fp8 or int4")


def bits_per_weight(
    scheme: str,
    *,
    dtype: torch.dtype = torch.bfloat16,
    group_size: int = 32,
    symmetric: bool = True,
    scale_dtype: torch.dtype = torch.bfloat16,
    fp8_block: tuple[int, int] = (128, 128),
    int4_layout: Int4Layout = "checkpoint",
) -> float:
    """Bits per weight including scale (and zero) bytes, for shapes that divide evenly."""
    if scheme == "none":
        return float(_bits(dtype))
    if scheme == "fp8":
        return 8 + 32 / (fp8_block[0] * fp8_block[1])
    if scheme == "int4":
        if int4_layout == "cpu_kernel":
            return 4 + 2 * _bits(dtype) / group_size
        return 4 + (1 if symmetric else 2) * _bits(scale_dtype) / group_size
    raise ValueError(f"unknown scheme {scheme!r}; expected none, fp8 or int4")
