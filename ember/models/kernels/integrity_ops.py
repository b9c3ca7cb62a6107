"""ctypes binding of ``integrity_ops.c``: the integrity checker's decode-step loops in one call
each (torch-free). The numpy code in ``engine/integrity.py`` is the reference and the general
path; ``load`` returns ``None`` (and the checker keeps that path) when the library cannot be
built, or with ``EMBER_KERNELS=0``.

Arguments are addresses (Python ints) and sizes: ``ndarray.ctypes`` costs ~2-7 us a call, more
than some of these loops, so callers keep the addresses of arrays that live as long as they do.
The loops are called through a CPython extension module built from the same source where this
interpreter's headers are installed (a call then costs ~4 us cold instead of ~16: see
``build.load_module``), else through ctypes; tests run both.
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path
from types import ModuleType

from ember.models.kernels.build import load_kernel, load_module

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("integrity_ops.c")
_I64 = ctypes.c_int64
_PTR = ctypes.c_void_p


class IntegrityOps:
    """The loaded loops (see ``integrity_ops.c`` for each one's contract), from the extension
    module (``module``) or, without one, the ctypes library (``library``): the same functions
    of Python ints."""

    def __init__(
        self, library: ctypes.CDLL | None = None, module: ModuleType | None = None
    ) -> None:
        if module is not None:
            self.binding = "module"
            self._count = module.count_epoch
            self._apply = module.apply_decode_run
            self._check = module.check_columns
            self._page_sums = module.page_sums
            return
        assert library is not None
        self.binding = "ctypes"
        self._count = library.ember_count_epoch
        self._count.restype = _I64
        self._count.argtypes = [_PTR, _I64, _PTR, _I64, _I64]
        self._apply = library.ember_apply_decode_run
        self._apply.restype = _I64
        self._apply.argtypes = [
            _I64, _I64, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR,  # run, its arrays
            _PTR, _PTR, _PTR, _PTR, _I64, _I64,  # the sidecar's, its sizes
        ]  # fmt: skip
        self._check = library.ember_check_columns
        self._check.restype = _I64
        self._check.argtypes = [
            _I64, _I64, _PTR, _I64, _I64, _PTR, _PTR, _PTR, _PTR,  # the group's
            _PTR, _PTR, _I64, _I64,  # the sidecar's
        ]  # fmt: skip
        self._page_sums = library.ember_page_sums
        self._page_sums.restype = _I64
        self._page_sums.argtypes = [_I64, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR, _I64, _I64, _PTR]

    def count_epoch(
        self, page_epoch: int, num_pages: int, pages: int, entries: int, epoch: int
    ) -> int:
        """Entries of the page table at ``pages`` (``entries`` int64) naming a page whose
        epoch (``page_epoch``: ``num_pages`` int64) is ``epoch``."""
        hits = self._count(page_epoch, num_pages, pages, entries, epoch)
        if hits < 0:
            raise ValueError("integrity count: a page table entry is outside the pool")
        return int(hits)

    def apply_decode_run(self, *args: int) -> int | None:
        """``ember_apply_decode_run`` (addresses and sizes in its order): stamps dropped
        (``None``: not one token a step, nothing written)."""
        dropped = self._apply(*args)
        if dropped == -2:
            return None
        if dropped < 0:
            raise ValueError("integrity flush: a slot or position is out of range")
        return int(dropped)

    def check_columns(self, *args: int) -> int:
        """``ember_check_columns`` (addresses and sizes in its order): pages that failed."""
        bad = self._check(*args)
        if bad < 0:
            raise ValueError("integrity check: a page or a length is out of range")
        return int(bad)

    def page_sums(self, *args: int) -> None:
        """``ember_page_sums`` (addresses and sizes in its order): adds into its ``out``."""
        if self._page_sums(*args) < 0:
            raise ValueError("integrity page sums: a page or word width is out of range")


def load(module: bool = True) -> IntegrityOps | None:
    """The loops, or ``None`` (numpy path) when disabled or they cannot be built: as the
    extension module when this interpreter's headers allow (``module``), else through ctypes."""
    if module:
        found = load_module(SOURCE, "ember_integrity_ops", log, "integrity loops")
        if found is not None:
            return IntegrityOps(module=found)
    return load_kernel(SOURCE, IntegrityOps, log, "integrity loops")
