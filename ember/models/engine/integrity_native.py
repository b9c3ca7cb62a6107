"""The integrity checker's decode fast paths as one native call each (``kernels/integrity_ops``),
torch-free.

Inside the engine each numpy op of the checker costs ~5-10 us (the caches are cold from the
forward), and its decode steps made dozens over 64 sequences: the ownership count whenever a page
starts, the flush's joins, per-sequence slices and fancy-index writes, the sampled check's
gathers and the concatenation of every reader's chain. Each method here does one of those with
one ctypes call over addresses kept from before, and declines (``False``/``None``) whatever is
not its case; the numpy code in ``integrity.py`` is then the path, and stays the reference the
tests compare these with on fresh random input. A check that fails is always reported by the
reference code: the native check only says whether everything passed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.models.engine.integrity_walk import PendingContent
from ember.models.kernels.integrity_ops import IntegrityOps
from ember.models.kv.integrity import KVSidecar


def _address(array: np.ndarray) -> int:
    return int(array.ctypes.data)


class NativeLoops:
    """``IntegrityOps`` bound to one sidecar (its arrays' addresses taken once: they live as
    long as the pool)."""

    def __init__(self, ops: IntegrityOps, sidecar: KVSidecar) -> None:
        self.ops = ops
        self.sidecar = sidecar
        self._chain = _address(sidecar.chain)
        self._position = _address(sidecar.position)
        self._digest = _address(sidecar.digest)
        self._page_epoch = _address(sidecar.page_epoch)
        self._cleared = _address(sidecar.cleared_epoch)
        self._num_pages = len(sidecar.page_epoch)
        self._scratch = np.empty(1024, dtype=np.int64)  # per-call arguments (``_fill``)
        # (cache, layer) -> its layer's address, heads, head stride, page bytes, word width,
        # for each layer laid out as ``page_sums`` reads it (pages of contiguous rows).
        self._layers: dict[tuple[int, int], tuple[int, int, int, int, int]] = {}
        for cache, words in enumerate(sidecar.layer_words):
            _, heads, _, size, width = words.shape
            item = words.itemsize
            if words.strides[2:] != (size * width * item, width * item, item):
                continue
            for layer in range(words.shape[0]):
                found = (_address(words[layer]), heads, words.strides[1], size * width * item)
                self._layers[cache, layer] = (*found, item)
        self._scratch_address = _address(self._scratch)

    def count_restamped(self, pages_address: int, entries: int) -> int:
        """Entries of the ``entries``-long int64 page table at ``pages_address`` naming a page
        restamped in the current epoch (``count_nonzero(page_epoch[pages] == epoch)``)."""
        return self.ops.count_epoch(
            self._page_epoch, self._num_pages, pages_address, entries, self.sidecar.epoch
        )

    def _fill(self, values: list[int]) -> int:
        """Copy ``values`` into the scratch array (one conversion) and return its address."""
        if len(values) > len(self._scratch):
            self._scratch = np.empty(2 * len(values), dtype=np.int64)
            self._scratch_address = _address(self._scratch)
        self._scratch[: len(values)] = values
        return self._scratch_address

    def flush_run(self, pending: list[PendingContent], digests: np.ndarray) -> bool:
        """Apply the stamps of ``pending`` (``digests``: their content digests, in write order)
        when it is one run of decode steps of the same readers, each moving every reader on by
        one token (``integrity_walk.positions_and_chains``' run case, with the same test, here
        made in C), whose slots' addresses are known. ``False``: not that case, nothing
        written."""
        first, last = pending[0], pending[-1]
        readers = first.readers
        if not readers or not hasattr(readers[0], "chain_address"):  # a test's stand-in
            return False
        for entry in pending:
            if entry.readers is not readers or not entry.address:
                return False
        steps, rows = len(pending), len(readers)
        if len(first.positions) != rows or len(last.positions) != rows:
            return False
        if (
            digests.dtype != np.uint64
            or digests.shape != (steps * rows,)
            or not digests.flags.c_contiguous
        ):
            return False
        # The run's arrays, laid end to end in the scratch array: ``np.array`` of each list and
        # ``ndarray.ctypes`` of each array cost ~7-15 us apiece here (cold, after a forward).
        values = [entry.address for entry in pending]
        values += [entry.epoch for entry in pending]
        values += [seq.chain_address for seq in readers]
        values += [seq.chain_capacity for seq in readers]
        values += first.positions
        values += last.positions
        base = self._fill(values)
        epochs = base + 8 * steps
        chains = epochs + 8 * steps
        sidecar = self.sidecar
        dropped = self.ops.apply_decode_run(
            steps,
            rows,
            base,
            chains + 16 * rows,  # first positions
            chains + 24 * rows,  # last positions
            chains,
            chains + 8 * rows,  # capacities
            _address(digests),
            epochs,
            self._chain,
            self._position,
            self._digest,
            self._cleared,
            sidecar.num_slots,
            sidecar.page_size,
        )
        return dropped is not None

    def columns_pass(
        self,
        pages: np.ndarray,
        first: int,
        step: int,
        seq_lens: Sequence[int],
        chain_addresses: Sequence[int],
        chain_lens: Sequence[int],
        sample: np.ndarray,
    ) -> bool | None:
        """Whether every page in columns ``first, first + step, ...`` of the ``(B, P)`` page
        table ``pages`` holds the chains its reader expects (``chain_addresses``: each reader's
        chain buffer, of ``chain_lens`` entries, read up to ``seq_lens``) and a stamped digest
        equal to ``sample``'s (``(B * n,)``: the digest of its bytes), as
        ``IntegrityChecker._check_pages`` decides it. ``None``: not this path's case (the
        arrays' layout), decided by the caller."""
        if (
            pages.dtype != np.int64
            or pages.ndim != 2
            or not pages.flags.c_contiguous
            or sample.dtype != np.uint64
            or not sample.flags.c_contiguous
            or len(chain_addresses) != pages.shape[0]
            or len(chain_lens) != pages.shape[0]
        ):
            return None
        num_rows, cols = pages.shape
        if sample.shape != (num_rows * len(range(first, cols, step)),):
            return None
        values = list(seq_lens)
        values += chain_addresses
        values += chain_lens
        lens = self._fill(values)
        sidecar = self.sidecar
        bad = self.ops.check_columns(
            num_rows,
            cols,
            _address(pages),
            first,
            step,
            lens,
            lens + 8 * num_rows,  # the chains' addresses
            lens + 16 * num_rows,  # their lengths
            _address(sample),
            self._chain,
            self._digest,
            self._num_pages,
            sidecar.page_size,
        )
        return bad == 0

    def page_digest(self, pages: np.ndarray, parts: list[tuple[int, int]]) -> np.ndarray | None:
        """``KVSidecar.page_digest(pages, parts)``: each page's word sum over the ``(cache,
        layer)`` pairs ``parts``, read from memory in one pass (numpy's ``take`` copies each
        layer's pages before summing them). ``None``: a layer is not laid out for it."""
        found = [self._layers.get(part) for part in parts]
        layers = [f for f in found if f is not None]
        if len(layers) != len(found):
            return None
        pages = np.ascontiguousarray(pages, dtype=np.int64)
        out = np.zeros(len(pages), dtype=np.uint64)
        count = len(layers)
        values = [f[field] for field in range(5) for f in layers]  # one array per field
        base = self._fill(values)
        self.ops.page_sums(
            count,
            *(base + 8 * count * field for field in range(5)),
            _address(pages),
            len(pages),
            self._num_pages,
            _address(out),
        )
        return out
