"""When KV pages are checked, and what a failed check means for a request (torch-free).

Stamps (``kv/integrity.py``) are written by every forward: the writer's chain and position before
it, the content digest after it. Checks run after the forward and *before any sampled token is
emitted*, so a request whose step read bad KV drops that step's token and recomputes:

- ``full``: every slot each scheduled sequence can read (its whole context, padding included) is
  checked for ownership (chain) and content (digest), every step.
- ``sampled``: ownership of the first slot of every page, every step (a page handed to another
  request is zeroed and rewritten from its first slot, so this catches every early reuse the step
  it could matter); ownership and content of every slot of the pages whose id is congruent to the
  step number modulo ``sample_period``, so each page is re-digested once every ``sample_period``
  steps (a flipped bit is found within that many steps).
- Always (both modes): every page a prefix-cache hit would reuse is verified before reuse.

A chain mismatch means the page now belongs to someone else: the reader drops it from its block
table without freeing it. A digest mismatch means the bytes were damaged: the page is dropped from
the prefix cache and every sequence holding it recomputes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ember.models.kv.integrity import KVSidecar


@dataclass(slots=True)
class IntegrityStats:
    slots_checked: int = 0  # ownership checks
    slots_digested: int = 0  # content re-digests
    failures: int = 0  # sequences that failed a check during a step
    reuse_failures: int = 0  # prefix-cache pages that failed before reuse (block manager)


@dataclass(slots=True)
class IntegrityFailure:
    """A sequence whose step read KV it must not trust."""

    seq_index: int  # index into the step's scheduled list
    disowned_pages: frozenset[int]  # written by another sequence
    corrupt_pages: frozenset[int]  # bytes changed since stamped
    first_bad_slot: int
    detail: str


@dataclass(slots=True)
class StepReads:
    """What one step's sequences read: padded slot rows and the chains their readers expect."""

    slots: np.ndarray  # (B, L) int64 pool slots (padding slots included)
    expected_chain: np.ndarray  # (B, L) uint64; 0 beyond each sequence (unwritten or padding)
    seq_index: list[int] = field(default_factory=list)  # row -> index in the scheduled list


class IntegrityChecker:
    """Runs the checks for one pool, per the configured mode."""

    def __init__(self, sidecar: KVSidecar, page_size: int, mode: str, sample_period: int) -> None:
        self.sidecar = sidecar
        self.page_size = page_size
        self.mode = mode
        self.sample_period = sample_period
        self.stats = IntegrityStats()

    # -- PageVerifier (the block manager calls this before reusing a cached page) -------------

    def verify_page(self, page: int, expected_chain: np.ndarray) -> bool:
        slots = np.arange(page * self.page_size, (page + 1) * self.page_size, dtype=np.int64)
        self.stats.slots_checked += len(slots)
        self.stats.slots_digested += len(slots)
        ok = self.sidecar.check(slots, expected_chain, content=True) is None
        if not ok:
            self.stats.reuse_failures += 1
        return ok

    # -- per step ----------------------------------------------------------------------------------

    def stamp_tokens(self, slots: np.ndarray, chains: np.ndarray, positions: np.ndarray) -> None:
        self.sidecar.stamp_tokens(slots, chains, positions)

    def stamp_content(self, slots: np.ndarray) -> None:
        self.sidecar.stamp_content(slots)

    def check_step(self, reads: list[StepReads], step: int) -> list[IntegrityFailure]:
        failures: list[IntegrityFailure] = []
        for group in reads:
            if self.mode == "full":
                picked = np.ones(group.slots.shape, dtype=bool)
                content = picked
            else:
                picked, content = self._sample(group.slots, step)
            failures.extend(self._check(group, picked, content))
        self.stats.failures += len(failures)
        return failures

    def _sample(self, slots: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Masks over ``slots``: ownership-checked positions, and fully re-digested ones."""
        pages = slots // self.page_size
        content = (pages + step) % self.sample_period == 0
        ownership = content.copy()
        ownership[:, :: self.page_size] = True
        return ownership, content

    def _check(
        self, group: StepReads, picked: np.ndarray, content: np.ndarray
    ) -> list[IntegrityFailure]:
        slots = group.slots[picked]
        expected = group.expected_chain[picked]
        sidecar = self.sidecar
        chain_bad = sidecar.chain[slots] != expected
        self.stats.slots_checked += len(slots)
        digest_bad = np.zeros(group.slots.shape, dtype=bool)
        if content.any():
            digested = group.slots[content]
            self.stats.slots_digested += len(digested)
            digest_bad[content] = sidecar.content_digest(digested) != sidecar.digest[digested]
        bad_chain = np.zeros(group.slots.shape, dtype=bool)
        bad_chain[picked] = chain_bad
        bad = bad_chain | digest_bad
        if not bad.any():
            return []
        failures = []
        for row in np.flatnonzero(bad.any(axis=1)):
            row_slots = group.slots[row]
            disowned = frozenset(int(s) // self.page_size for s in row_slots[bad_chain[row]])
            corrupt = frozenset(int(s) // self.page_size for s in row_slots[digest_bad[row]])
            first = int(np.flatnonzero(bad[row])[0])
            slot = int(row_slots[first])
            detail = (
                f"slot {slot} (position {first}): "
                + ("written by another sequence" if bad_chain[row, first] else "bytes changed")
                + f"; stamped position {int(sidecar.position[slot])}"
            )
            failures.append(
                IntegrityFailure(
                    seq_index=group.seq_index[row],
                    disowned_pages=disowned,
                    corrupt_pages=corrupt - disowned,
                    first_bad_slot=slot,
                    detail=detail,
                )
            )
        return failures
