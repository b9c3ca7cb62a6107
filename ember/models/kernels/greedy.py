"""ctypes binding of ``greedy.c``: the first maximum of each row of logits (greedy decoding).

The torch paths in ``engine/sampling.py`` (``greedy_tokens``' two-level pick and
``greedy_tokens_reference``, one indexed ``max``) stay the reference and the fallback: ``load``
returns ``None`` when the library cannot be built (logged once) or ``EMBER_KERNELS=0``.
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

import numpy as np
import torch

from ember.models.kernels.build import load_kernel

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("greedy.c")
_CODES = {torch.float32: 0, torch.bfloat16: 1}
_I64 = ctypes.c_int64
_PTR = ctypes.c_void_p


class GreedyKernel:
    """The loaded library; ``pick`` gives each row's first maximum."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._greedy = library.ember_greedy
        self._greedy.restype = None
        self._greedy.argtypes = [_PTR, ctypes.c_int, _I64, _I64, _I64, _PTR]

    @staticmethod
    def fits(logits: torch.Tensor) -> bool:
        """Whether ``pick`` takes ``logits``: 2-D float32 or bfloat16 on the CPU, each row
        contiguous, at least one column."""
        return (
            logits.dim() == 2
            and logits.dtype in _CODES
            and logits.device.type == "cpu"
            and logits.shape[1] > 0
            and (logits.stride(1) == 1 or logits.shape[1] == 1)
        )

    def pick(self, logits: torch.Tensor) -> list[int]:
        """The index of the first maximum of each row (``fits`` must hold), NaN counting as the
        maximum, as ``logits.max(dim=-1).indices``."""
        rows, vocab = logits.shape
        out = np.empty(rows, dtype=np.int64)
        self._greedy(logits.data_ptr(), _CODES[logits.dtype], rows, vocab, logits.stride(0),
                     out.ctypes.data)  # fmt: skip
        return out.tolist()


def load() -> GreedyKernel | None:
    """The kernel, or ``None`` (torch path) when disabled or it cannot be built."""
    return load_kernel(SOURCE, GreedyKernel, log, "greedy kernel")
