"""ctypes binding of ``stored_sums.c``: the KV store of a layer's new entries (torch's
``index_put`` is the reference), summing each token's content digest while its rows are hot
(``paged_batch.stored_digests``, over the tensors the torch path keeps, is the reference).

One call per store. If the library cannot be built, ``load`` logs one line and returns ``None``
and the backend keeps the torch path; ``EMBER_KERNELS=0`` forces that.
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

import torch

from ember.models.kernels.build import load_kernel

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("stored_sums.c")
_I64 = ctypes.c_int64
_PTR = ctypes.c_void_p


class StoreKernel:
    """The loaded library; ``store`` writes one layer's new entries (and sums them)."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._store = library.ember_store_rows
        self._store.restype = ctypes.c_int
        self._store.argtypes = [
            _PTR, _I64, _I64, _I64, _I64, _I64,  # src, tokens, heads, strides, row bytes
            _PTR, _I64, _PTR,  # cache, its head stride, slots
            _PTR, ctypes.c_int, ctypes.POINTER(ctypes.c_double),  # sums, add, seconds
        ]  # fmt: skip

    @staticmethod
    def fits(cache: torch.Tensor, new: torch.Tensor) -> bool:
        """Whether ``store`` takes ``new`` ``(T, heads, width)`` into ``cache`` ``(heads, pages,
        S, width)``: same dtype and row shape, contiguous cache, contiguous rows."""
        return (
            new.dim() == 3
            and new.dtype == cache.dtype
            and new.shape[1] == cache.shape[0]
            and new.shape[2] == cache.shape[3]
            and (new.stride(2) == 1 or new.shape[2] == 1)
            and cache.is_contiguous()
        )

    def store(
        self,
        cache: torch.Tensor,
        new: torch.Tensor,
        slots: torch.Tensor,
        sums: int = 0,
        add: bool = False,
    ) -> float:
        """``cache[:, slots // S, slots % S] = new.transpose(0, 1)`` (``fits`` must hold;
        ``slots`` ``(T,)`` contiguous int64, each in the pool). With ``sums``, the address of
        ``T`` int64 (an address: ``ndarray.ctypes`` costs microseconds a call), also write
        (``add``: add) each token's wrap-around word sum there (rows of whole 64-bit words);
        returns the seconds the sums took (0.0 without)."""
        size = new.itemsize
        row = new.shape[2] * size
        if sums and row % 8:
            raise ValueError("content sums need rows of whole 64-bit words")
        seconds = ctypes.c_double(0.0)
        s0, s1, _ = new.stride()
        heads, pages, page_size, _ = cache.shape
        status = self._store(
            new.data_ptr(), new.shape[0], heads, s0 * size, s1 * size, row,
            cache.data_ptr(), pages * page_size * row, slots.data_ptr(),
            sums or None, int(add), ctypes.byref(seconds),
        )  # fmt: skip
        if status != 0:
            raise ValueError("store kernel: a row is not whole 64-bit words")
        return seconds.value


def load() -> StoreKernel | None:
    """The kernel, or ``None`` (torch path) when disabled or it cannot be built."""
    return load_kernel(SOURCE, StoreKernel, log, "KV store kernel")
