"""KV integrity sidecar: what every cache slot should hold, stamped on write, checked on read.

Each slot (one token's cache entry, all layers) carries three stamps, kept in host arrays beside
the pool (numpy views of the same memory, so this module is torch-free):

- ``chain``: the token chain hash of the sequence that wrote the slot, up to and including this
  token (``chain_step`` over (token, position) pairs from the start of the sequence). A slot is
  valid for a reader only if the reader's own chain at that position is identical, which is true
  exactly when both sequences have the same tokens at every position up to here, i.e. when the
  cached entry is the one the reader would have computed.
- ``position``: the token's position (kept for diagnostics; the chain already binds it).
- ``digest``: a checksum of the slot's stored bytes across all layers: the wrap-around sum of the
  bytes read as 64-bit words (narrower words when a row is not a multiple of 8 bytes). Any single
  flipped bit changes exactly one word by +-2^k, so it always changes the sum.

A page's sidecar is the stamps of its ``page_size`` slots. Stamps are per slot rather than one per
page so that appending a token to a page never re-stamps (and so hides) an earlier slot's damage.

Threats, in the order serving.md §3 ranks them: cross-request contamination (a page freed while
still in use and rewritten by its next owner: the chain no longer matches), hardware or transfer
corruption (a flipped bit: the digest no longer matches), and a stale prefix-cache entry.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

_MASK64 = (1 << 64) - 1
CHAIN_SEED = 0x6A09E667F3BCC908  # the chain of an empty sequence


def chain_seed(cache_salt: str | None) -> int:
    """The chain of an empty sequence under ``cache_salt`` (vLLM's request field): every key and
    stamp of a salted request differs from the first token on, so requests of different salts
    never share a prefix-cache page. No salt: ``CHAIN_SEED``, the chains as they always were."""
    if cache_salt is None:
        return CHAIN_SEED
    digest = hashlib.blake2b(cache_salt.encode("utf-8"), digest_size=8, person=b"ember-salt")
    return chain_step(CHAIN_SEED, int.from_bytes(digest.digest(), "little"), -1)


def chain_step(prev: int, token: int, position: int) -> int:
    """Extend a token chain hash by one (token, position): splitmix64's finaliser over a mix."""
    x = (
        prev
        ^ (((token + 1) * 0x9E3779B97F4A7C15) & _MASK64)
        ^ ((position * 0xC2B2AE3D27D4EB4F) & _MASK64)
    )
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _MASK64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _word_view(rows: np.ndarray) -> np.ndarray:
    """View ``(..., row_bytes)`` uint8 rows as the widest unsigned words that divide a row."""
    row_bytes = rows.shape[-1]
    for width, dtype in ((8, np.uint64), (4, np.uint32), (2, np.uint16)):
        if row_bytes % width == 0:
            return rows.view(dtype)
    return rows


def content_digest_reference(rows: list[np.ndarray]) -> int:
    """Slow reference for one slot: sum of its bytes as words, mod 2^64, over every layer's row."""
    total = 0
    for row in rows:
        for word in _word_view(np.ascontiguousarray(row)).tolist():
            total = (total + int(word)) & _MASK64
    return total


@dataclass(frozen=True, slots=True)
class SlotMismatch:
    """Which checked slots failed, and why (for the counter, the log and the error message)."""

    slots: np.ndarray  # int64 slot ids
    chain_mismatch: np.ndarray  # bool, the slot was written by a different sequence
    digest_mismatch: np.ndarray  # bool, the bytes changed since they were stamped


class KVSidecar:
    """Per-slot stamps for one KV pool, and the checks that compare them with a reader's view.

    ``data`` holds uint8 views of the pool's cache tensors, each ``(layers, heads, pages,
    page_size, width_bytes)``; they share memory with the pool's tensors. A slot's bytes are its
    ``(page, offset)`` entries in every layer and head of every tensor.
    """

    def __init__(self, data: list[np.ndarray], page_size: int) -> None:
        num_pages = data[0].shape[2]
        for array in data:
            if array.dtype != np.uint8 or array.ndim != 5 or array.shape[2] != num_pages:
                raise ValueError("sidecar data must be (L, heads, pages, page_size, bytes) uint8")
            if array.shape[3] != page_size:
                raise ValueError(f"sidecar data has page size {array.shape[3]}, not {page_size}")
        self._words = [_word_view(array) for array in data]
        self.page_size = page_size
        num_slots = num_pages * page_size
        self.num_slots = num_slots
        self.chain = np.zeros(num_slots, dtype=np.uint64)
        self.position = np.full(num_slots, -1, dtype=np.int32)
        self.digest = np.zeros(num_slots, dtype=np.uint64)
        # When each page's first slot was last restamped (a clear for a new owner, or the write
        # of the page's first token), in ``epoch`` units (the engine advances ``epoch`` once per
        # step): a reader that checked its pages at epoch e only needs to re-check the first
        # slot of pages restamped since. A page changes hands only through both.
        self.epoch = 0
        self.page_epoch = np.full(num_pages, -1, dtype=np.int64)
        # The latest epoch any page was restamped in: a reader that passed a check after it has
        # nothing to re-check (the common decode step, where no page starts or changes hands).
        self.restamp_epoch = -1
        # When each page was last cleared: a content stamp computed later than its write (see
        # ``apply_content``) is dropped if its page was cleared for a new owner since.
        self.cleared_epoch = np.full(num_pages, -1, dtype=np.int64)

    @property
    def stored_bytes_per_slot(self) -> int:
        """Bytes one slot holds across every layer and head of every cache."""
        return sum(w.shape[0] * w.shape[1] * w.shape[4] * w.itemsize for w in self._words)

    @property
    def bytes_per_slot(self) -> int:
        return self.chain.itemsize + self.position.itemsize + self.digest.itemsize

    def content_digest(self, slots: np.ndarray) -> np.ndarray:
        """Digest of each slot's stored bytes across all layers, vectorised: ``(n,)`` uint64."""
        total = np.zeros(len(slots), dtype=np.uint64)
        pages, offsets = np.divmod(slots, self.page_size)
        for words in self._words:
            picked = words[:, :, pages, offsets]  # (L, heads, n, words)
            total += picked.sum(axis=(0, 1, 3), dtype=np.uint64)
        return total

    def page_digest(
        self, pages: np.ndarray, parts: list[tuple[int, int]] | None = None
    ) -> np.ndarray:
        """Sum of the content digests of every slot of each page, from the bytes: ``(n,)``.

        Equal to ``stamped_page_digest`` unless a byte changed; computed page by page (one
        contiguous run per layer and head), several times faster than slot by slot. With
        ``parts``, only those ``(cache, layer)`` pairs are read (the rest were summed elsewhere).
        """
        total = np.zeros(len(pages), dtype=np.uint64)
        if parts is None:
            for words in self._words:
                layers, heads, num_pages, size, width = words.shape
                runs = words.reshape(layers, heads, num_pages, size * width)
                picked = np.take(runs, pages, axis=2)  # (L, heads, n, S * words)
                total += picked.sum(axis=3, dtype=np.uint64).sum(axis=(0, 1), dtype=np.uint64)
            return total
        for cache, layer in parts:
            words = self._words[cache][layer]
            heads, num_pages, size, width = words.shape
            picked = np.take(words.reshape(heads, num_pages, size * width), pages, axis=1)
            total += picked.sum(axis=2, dtype=np.uint64).sum(axis=0, dtype=np.uint64)
        return total

    @property
    def layer_words(self) -> list[np.ndarray]:
        """Each cache's ``(layers, heads, pages, page_size, words)`` word view (``data``'s)."""
        return self._words

    @property
    def cache_layers(self) -> list[int]:
        """How many layers each cache (in ``data`` order) has."""
        return [words.shape[0] for words in self._words]

    def stamped_page_digest(self, pages: np.ndarray) -> np.ndarray:
        """Sum of the digests stamped for every slot of each page: ``(n,)``."""
        slots = pages[:, None] * self.page_size + np.arange(self.page_size)
        return self.digest[slots].sum(axis=1, dtype=np.uint64)

    def stamp_tokens(self, slots: np.ndarray, chains: np.ndarray, positions: np.ndarray) -> None:
        """Record who writes ``slots`` (before the forward that writes them)."""
        self.position[slots] = positions
        self.stamp_writers(slots, chains, slots[slots % self.page_size == 0])

    def stamp_writers(
        self, slots: np.ndarray, chains: np.ndarray, firsts: np.ndarray | None
    ) -> None:
        """Record who writes ``slots`` (before the forward); ``firsts`` are those of them that
        start a page (the caller knows them from the positions, with no array pass)."""
        self.chain[slots] = chains
        if firsts is not None and len(firsts):
            pages = firsts // self.page_size
            self.page_epoch[pages] = self.epoch
            self.restamp_epoch = self.epoch

    def stamp_starts(self, slots: list[int], chains: list[int]) -> None:
        """``stamp_writers`` for a decode step's few page-start slots, as Python ints: scalar
        writes (a fancy-index op each cost more, inside the engine, than these few writes)."""
        if not slots:
            return
        size, epoch, chain, page_epoch = self.page_size, self.epoch, self.chain, self.page_epoch
        for slot, value in zip(slots, chains, strict=True):
            chain[slot] = value
            page_epoch[slot // size] = epoch
        self.restamp_epoch = epoch

    def apply_content(
        self,
        slots: np.ndarray,
        digests: np.ndarray,
        positions: np.ndarray,
        epochs: np.ndarray,
        chains: np.ndarray | None = None,
    ) -> None:
        """Content stamps (and positions, and writer ``chains`` when given) for ``slots``,
        written at ``epochs`` and computed since (digests from the written tensors), in write
        order; a stamp whose page was cleared after its write is dropped (the slot now belongs
        to the page's next owner)."""
        live = self.cleared_epoch[slots // self.page_size] <= epochs
        if not live.all():
            slots, digests, positions = slots[live], digests[live], positions[live]
            if chains is not None:
                chains = chains[live]
        self.digest[slots] = digests
        self.position[slots] = positions
        if chains is not None:
            self.chain[slots] = chains

    def stamp_content(self, slots: np.ndarray) -> None:
        """Record the bytes just written to ``slots`` (after the forward)."""
        self.digest[slots] = self.content_digest(slots)

    def check(
        self, slots: np.ndarray, expected_chain: np.ndarray, *, content: bool
    ) -> SlotMismatch | None:
        """Compare ``slots`` with the chain values their reader expects; optionally re-digest.

        Returns ``None`` when every slot matches (the common case costs two vectorised passes).
        """
        chain_bad = self.chain[slots] != expected_chain
        if content:
            digest_bad = self.content_digest(slots) != self.digest[slots]
        else:
            digest_bad = np.zeros(len(slots), dtype=bool)
        bad = chain_bad | digest_bad
        if not bad.any():
            return None
        return SlotMismatch(
            slots=np.asarray(slots, dtype=np.int64)[bad],
            chain_mismatch=chain_bad[bad],
            digest_mismatch=digest_bad[bad],
        )

    def clear(self, slots: np.ndarray) -> None:
        """Forget the stamps of slots whose page was zeroed for a new owner."""
        self.chain[slots] = 0
        self.position[slots] = -1
        self.digest[slots] = 0
        pages = slots // self.page_size
        self.page_epoch[pages] = self.epoch
        self.cleared_epoch[pages] = self.epoch
        if len(slots):
            self.restamp_epoch = self.epoch

    def advance(self) -> None:
        """Start the next epoch (the engine does once per step, after its checks)."""
        self.epoch += 1
