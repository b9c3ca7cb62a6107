"""Deferred content stamps: what each forward wrote, digested several steps at once (torch-free).

Every forward stamps the slots it wrote with their content digest, position and (decode) chain.
Computing those per step cost a handful of ops, each ~10-60 us with the caches cold right after a
forward; ``ContentStamps`` keeps what each step wrote (``defer_content``) and stamps the pending
steps together (``flush``), from the written tensors, with ``digester`` (the model runner's,
which owns the tensors). ``IntegrityChecker`` (``integrity.py``) is a ``ContentStamps``: every
check that reads a digest or a position flushes first, so no check ever sees a missing stamp.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ember.models.engine.integrity_native import NativeLoops
from ember.models.engine.integrity_walk import (
    PendingContent,
    SequenceLike,
    positions_and_chains,
    token_chains,
)
from ember.models.kv.integrity import KVSidecar


class ContentStamps:
    """The pending content stamps of one pool's sidecar and the flush that applies them.

    The flush runs whenever ``max_pending`` tokens wait (and, from the checker, at least every
    ``CONTENT_STRIDE`` steps and before every check that reads a stamp).
    """

    # Bounds what a flush keeps alive: the written tensors of this many bytes of KV (and at
    # least a few decode steps' worth of tokens).
    MAX_PENDING_BYTES = 64 << 20

    def __init__(self, sidecar: KVSidecar, native: NativeLoops | None) -> None:
        self.sidecar = sidecar
        # The decode fast paths in one native call each (``None``: the numpy code, their
        # reference, does everything).
        self.native = native
        self.digester: Callable[[list[object]], np.ndarray] | None = None
        # Joins the pending steps' slots into one int64 array (``None``: ``np.concatenate``;
        # the runner's joins its slot-mapping tensors with one ``torch.cat``, where each
        # tensor's conversion to numpy cost ~15 us, 16 a flush).
        self.slot_joiner: Callable[[list[ArrayLike]], np.ndarray] | None = None
        self._pending: list[PendingContent] = []
        self._pending_tokens = 0
        self.max_pending = max(256, self.MAX_PENDING_BYTES // max(1, sidecar.stored_bytes_per_slot))

    def defer_content(
        self,
        slots: ArrayLike,
        positions: Sequence[int],
        written: object,
        readers: list[SequenceLike] | None = None,
        address: int = 0,
    ) -> None:
        """Stamp ``slots``' content and positions at a later flush, from ``written`` (which the
        caller may still be filling: the runner registers a step before its forward), and with
        ``readers`` (a decode step: row i's sequence wrote ``positions[i]``) their chains too.
        ``address``: of ``slots``' int64 data, for the native flush."""
        tokens = len(positions)  # as many as slots: a list's length (a tensor's costs more)
        if self._pending_tokens + tokens > self.max_pending:
            self.flush()
        entry = PendingContent(slots, positions, self.sidecar.epoch, written, readers, address)
        self._pending.append(entry)
        self._pending_tokens += tokens

    def flush_if_full(self, chunk: bool = False) -> None:
        """Flush once ``max_pending`` tokens wait, or when the step just run wrote a prefill
        chunk (``chunk``; the runner asks after each forward). A chunk's stamps are one big
        digest that bulk gains nothing on, so its own step pays for them and frees its
        tensors; left pending (below the byte bound) they were digested at the first decode
        sample step, which then cost a prefill's worth: 12 ms for a 2048-token glm4-tiny
        chunk, ~0.2 ms a step over 64 decode steps."""
        if chunk or self._pending_tokens >= self.max_pending:
            self.flush()

    def stamp_now(self, slots: np.ndarray, positions: Sequence[int]) -> None:
        """Replace the latest ``defer_content`` (``slots``) by stamps read from memory now: the
        fallback for rows that are not whole 64-bit words."""
        entry = self._pending.pop()
        self._pending_tokens -= len(entry.positions)
        self.flush()  # keep write order
        self.sidecar.digest[slots] = self.sidecar.content_digest(slots)
        self.sidecar.position[slots] = positions
        if entry.readers is not None:
            self.sidecar.chain[slots] = token_chains(entry.readers, positions)

    def flush(self) -> None:
        """Compute and apply every deferred content stamp (in write order)."""
        pending = self._pending
        if not pending:
            return
        assert self.digester is not None, "deferred content stamps need a digester"
        self._pending, self._pending_tokens = [], 0
        digests = self.digester([p.written for p in pending])
        if self.native is not None and self.native.flush_run(pending, digests):
            return  # one run of decode steps: stamped in one native call
        positions, chains = positions_and_chains(pending, self.sidecar.chain)
        # Slots arrive as arrays or as a decode step's slot-mapping tensor, converted here once
        # a flush rather than every step (``numpy()`` there cost ~15 us inside the engine).
        if len(pending) == 1:
            slots, epochs = np.asarray(pending[0].slots), np.int64(pending[0].epoch)
        else:
            if self.slot_joiner is not None:  # the runner's: its tensors joined in one op
                slots = self.slot_joiner([p.slots for p in pending])
            else:
                slots = np.concatenate([np.asarray(p.slots) for p in pending])
            epochs = np.repeat([p.epoch for p in pending], [len(p.positions) for p in pending])
        # A slot is written once between clears (prefix hits are never rewritten), so at most
        # one pending stamp per slot survives ``apply_content``'s clear filter.
        self.sidecar.apply_content(slots, digests, positions, epochs, chains)
