"""ctypes binding of ``paged_decode.c``: decode attention that walks the page table itself,
grouped-query (GLM-4.x) and absorbed latent (MLA: Kimi, GLM-5.x).

One call per layer covers every sequence of a decode group (a ctypes call costs ~1-3 us; one per
sequence would cost more than the work at glm4-tiny's sizes). Shapes, dtypes and contiguity are
checked here; page-table contents (every page in the pool, every length within its pages) are the
``PagedBatch`` builder's guarantee, as they are for the torch gathers.

If the library cannot be built (no compiler, a failing build, an unwritable cache), ``load``
logs one line and returns ``None``: the caller keeps the torch path, which stays the reference.
Set ``EMBER_KERNELS=0`` to use the torch path on purpose.
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

import torch

from ember.models.kernels.build import load_kernel

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("paged_decode.c")
_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float8_e4m3fn: 2, torch.float8_e5m2: 3}
_I64 = ctypes.c_int64
_PTR = ctypes.c_void_p


class PagedDecodeKernel:
    """The loaded library; ``gqa`` runs one layer of grouped-query decode attention."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._gqa = library.ember_gqa_decode
        self._gqa.restype = ctypes.c_int
        self._gqa.argtypes = [
            _PTR, ctypes.c_int, _I64,  # q, q dtype, q row stride
            _PTR, _PTR, ctypes.c_int, _I64,  # k cache, v cache, kv dtype, pool pages
            _PTR, _I64, _PTR, _I64,  # pages, pages per sequence, seq_lens, sequences
            _I64, _I64, _I64, _I64, _I64, _I64,  # kv heads, group, head/v dim, v row, page size
            ctypes.c_float, _PTR, ctypes.c_int,  # output scale, out, out dtype
            _PTR, _I64, _I64,  # integrity sums, first column, column step
            ctypes.POINTER(ctypes.c_double),  # seconds the sums took (added to)
        ]  # fmt: skip

    def gqa(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        pages: torch.Tensor,
        seq_lens: torch.Tensor,
        out: torch.Tensor,
        out_scale: float = 1.0,
        sums: torch.Tensor | None = None,
        sample_first: int = 0,
        sample_step: int = 0,
    ) -> float:
        """``out[b] = softmax(q[b] k_b^T) v_b * out_scale`` for every sequence ``b``.

        ``q`` ``(B, H, D)`` float32 or bfloat16, scales already folded in, rows may be strided;
        ``k_cache`` ``(Hkv, N, S, D)``, ``v_cache`` ``(Hkv, N, S, Dv)``, one layer, contiguous,
        float32, bfloat16, float8_e4m3fn or float8_e5m2 (stored values; their scales folded into
        ``q`` and ``out_scale``); ``pages`` ``(B * P,)`` int64 page table; ``seq_lens``
        ``(B,)`` int64, each in ``1 .. P * S``; ``out`` ``(B, H, Dv)`` contiguous, float32 or
        bfloat16.
        ``sums`` ``(B, n)`` int64: add the integrity sample of columns ``sample_first,
        sample_first + sample_step, ...`` (``PageSample``) when ``sample_step > 0``. Returns
        the seconds those sums took (0.0 without a sample): the integrity checker's share.
        """
        if v_cache.data_ptr() == k_cache.data_ptr():
            raise ValueError("distinct K and V caches expected (use mla for one cache)")
        return self._run(q, k_cache, v_cache, v_cache.shape[-1], pages, seq_lens, out,
                         out_scale, sums, sample_first, sample_step)  # fmt: skip

    def mla(
        self,
        q: torch.Tensor,
        kv_cache: torch.Tensor,
        rank: int,
        pages: torch.Tensor,
        seq_lens: torch.Tensor,
        out: torch.Tensor,
        out_scale: float = 1.0,
        sums: torch.Tensor | None = None,
        sample_first: int = 0,
        sample_step: int = 0,
    ) -> float:
        """Absorbed MLA decode: ``kv_cache`` ``(1, N, S, C + R)`` rows are the keys and their
        first ``rank`` (C) elements the values; ``q`` ``(B, H, C + R)``, ``out`` ``(B, H, C)``.
        Each page is read once for both and summed once for the integrity sample; returns
        the seconds the sums took, as ``gqa``."""
        return self._run(q, kv_cache, kv_cache, rank, pages, seq_lens, out, out_scale,
                         sums, sample_first, sample_step)  # fmt: skip

    def _run(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        v_dim: int,
        pages: torch.Tensor,
        seq_lens: torch.Tensor,
        out: torch.Tensor,
        out_scale: float,
        sums: torch.Tensor | None,
        sample_first: int,
        sample_step: int,
    ) -> float:
        num_seqs, num_heads, head_dim = q.shape
        num_kv_heads, pool_pages, page_size, _ = k_cache.shape
        v_row = v_cache.shape[-1]
        if not 0 < v_dim <= v_row:
            raise ValueError(f"value width {v_dim} outside 1..{v_row}")
        num_pages = pages.numel() // max(num_seqs, 1)
        if q.dtype not in (torch.float32, torch.bfloat16) or out.dtype not in (
            torch.float32,
            torch.bfloat16,
        ):
            raise TypeError(f"q and out must be float32 or bfloat16, not {q.dtype}, {out.dtype}")
        if k_cache.dtype != v_cache.dtype or k_cache.dtype not in _CODES:
            raise TypeError(f"unsupported cache dtypes {k_cache.dtype}, {v_cache.dtype}")
        if q.stride(2) != 1 or q.stride(1) != head_dim:
            raise ValueError("each query row must be contiguous (H, D)")
        if num_heads % num_kv_heads or v_cache.shape[:3] != k_cache.shape[:3]:
            raise ValueError(f"shapes do not agree: q {tuple(q.shape)}, k {tuple(k_cache.shape)}")
        if k_cache.shape[-1] != head_dim or out.shape != (num_seqs, num_heads, v_dim):
            raise ValueError(f"shapes do not agree: k {tuple(k_cache.shape)}, out {out.shape}")
        for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("out", out)):
            if not t.is_contiguous():
                raise ValueError(f"{name} must be contiguous")
        for name, t in (("pages", pages), ("seq_lens", seq_lens)):
            if t.dtype != torch.int64 or not t.is_contiguous():
                raise ValueError(f"{name} must be contiguous int64")
        if seq_lens.numel() != num_seqs or pages.numel() != num_seqs * num_pages:
            raise ValueError("pages and seq_lens must have one row per sequence")
        sums_ptr = None
        if sample_step > 0:
            assert sums is not None and sums.dtype == torch.int64 and sums.is_contiguous()
            if len(range(sample_first, num_pages, sample_step)) != sums.shape[-1]:
                raise ValueError("sums must have one column per sampled page column")
            elements = (page_size * head_dim, page_size * v_row)
            if any(n * k_cache.element_size() % 8 for n in elements):
                raise ValueError("an integrity sample needs pages of whole 64-bit words")
            sums_ptr = sums.data_ptr()
        sum_seconds = ctypes.c_double(0.0)
        status = self._gqa(
            q.data_ptr(), _CODES[q.dtype], q.stride(0),
            k_cache.data_ptr(), v_cache.data_ptr(), _CODES[k_cache.dtype], pool_pages,
            pages.data_ptr(), num_pages, seq_lens.data_ptr(), num_seqs,
            num_kv_heads, num_heads // num_kv_heads, head_dim, v_dim, v_row, page_size,
            out_scale, out.data_ptr(), _CODES[out.dtype],
            sums_ptr, sample_first, sample_step, ctypes.byref(sum_seconds),
        )  # fmt: skip
        if status != 0:
            raise MemoryError("paged decode kernel: scratch allocation failed")
        return sum_seconds.value


def load() -> PagedDecodeKernel | None:
    """The kernel, or ``None`` (torch path) when disabled or it cannot be built."""
    return load_kernel(SOURCE, PagedDecodeKernel, log, "paged decode kernel")
