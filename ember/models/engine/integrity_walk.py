"""What the integrity checker needs from a step's scheduled sequences, with as little
per-sequence work as a decode step allows (torch-free).

After a forward every per-sequence touch misses the caches: a loop that reads each sequence's
chain buffer and epoch cost ~55 us per batch-64 glm4-tiny step inside the engine (~20 us of it
the chain reads), against ~20 us isolated. So a step of single tokens (a decode step) does:

- *chains*: only the tokens that start a page are stamped before the forward (the ownership
  check reads page first slots); the other writers' chains are stamped at the next flush of the
  deferred stamps (``IntegrityChecker.flush``), several steps at once, from one slice of each
  sequence's chain buffer. Every check that reads a stamp other than a first slot flushes first.
- *epochs*: each sequence records the sidecar epoch of its last passed check. While a decode
  step schedules the very same sequences as the previous one (a pointer comparison of two
  lists) and none was reset since (its epoch still the one recorded), all of them passed at the
  previous step, and the epochs are not written; they are written out (``settle``) when the
  batch changes or a check fails.

``walk_reference`` is the plain one-pass walk over every sequence: the general path (steps with
prefill chunks) and the reference the fast path is tested against.
"""

from __future__ import annotations

from collections.abc import Sequence as Sequence_
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from ember.models.engine.scheduler import ScheduledSeq
from ember.models.engine.sequence import Sequence


class SequenceLike(Protocol):
    """What the deferred chains read from a sequence (``Sequence``)."""

    chain_buffer: np.ndarray


@dataclass(slots=True)
class Walk:
    """What the checker needs from one step's scheduled sequences."""

    chains: list[np.ndarray] | None  # each sequence's chain buffer (``None``: not collected)
    epochs: list[int]  # epoch of each sequence's last passed check, before this step
    writer: np.ndarray | None  # (T,) chain of every new token (``None``: deferred, ``readers``)
    firsts: list[int]  # batch rows whose token starts a page
    decode: bool  # one new token per sequence (batch row i = sequence i)
    first_slots: list[int] | None = None  # slots of the ``firsts`` rows (decode)
    first_chains: list[int] | None = None  # their writers' chains (decode)
    readers: list[Sequence] | None = None  # decode: row i's writer, for the deferred chains


def walk_reference(scheduled: list[ScheduledSeq], epoch: int, page_size: int) -> Walk:
    """One pass over the step's sequences: each one's chain buffer, the epoch of its last
    passed check (moved on to ``epoch``, this check's, which a failure undoes), the chain of
    every new token in batch order (its slot's stamp), and the batch rows that start a page."""
    chains: list[np.ndarray] = []
    epochs: list[int] = []
    firsts: list[int] = []
    writer: list[int] = []  # decode: one Python int per sequence (no array views)
    chunks: dict[int, np.ndarray] = {}  # entry -> its chunk's chains
    row = 0
    for index, entry in enumerate(scheduled):
        seq = entry.seq
        chain = seq.chain_buffer
        chains.append(chain)
        epochs.append(seq.integrity_epoch)
        seq.integrity_epoch = epoch
        start, count = entry.context_len, entry.num_new_tokens
        if count == 1:
            writer.append(chain.item(start))
            if start % page_size == 0:
                firsts.append(row)
        else:  # a prefill chunk: its rows at a page start
            chunks[index] = chain[start : start + count]
            writer.append(0)
            firsts.extend(range(row + (-start % page_size), row + count, page_size))
        row += count
    if not chunks:
        stamps = np.array(writer, dtype=np.uint64)
    else:
        stamps = np.concatenate(
            [
                chunks[i] if i in chunks else np.array([value], dtype=np.uint64)
                for i, value in enumerate(writer)
            ]
        )
    return Walk(chains, epochs, stamps, firsts, not chunks)


def run_chains(readers: list[SequenceLike], first: Sequence_[int], steps: int) -> np.ndarray:
    """``(steps * B,)`` chains written by ``steps`` decode steps of the same ``B`` readers, in
    write order (step-major), when each step moved every reader on by one token from
    ``first``: one slice of each reader's chain buffer, copied into its column of the result
    (43 us for 64 readers at a flush, in the engine, where one concatenation then a transposed
    copy took 71; a stack was slower still)."""
    out = np.empty((steps, len(readers)), dtype=np.uint64)
    for column, (seq, p) in enumerate(zip(readers, first, strict=True)):
        out[:, column] = seq.chain_buffer[p : p + steps]
    return out.reshape(-1)


def token_chains(readers: list[SequenceLike], positions: Sequence_[int]) -> np.ndarray:
    """``(B,)`` chain of each reader at its position (one decode step's, read one by one)."""
    return np.array(
        [seq.chain_buffer.item(p) for seq, p in zip(readers, positions, strict=True)],
        dtype=np.uint64,
    )


@dataclass(slots=True)
class PendingContent:
    """One step's content stamps, waiting for a flush (``IntegrityChecker.defer_content``)."""

    slots: ArrayLike  # (T,) slots one step wrote (a decode step's: its slot-mapping tensor)
    positions: Sequence_[int]  # (T,) their positions
    epoch: int  # the sidecar epoch of the write
    written: object  # what the digester turns into the (T,) digests: the tensors written
    # A decode step's writers (row order), whose chains other than at page starts are stamped
    # at the flush (``integrity_walk``); ``None``: every chain was stamped at the write.
    readers: list[SequenceLike] | None = None
    address: int = 0  # of ``slots`` when an int64 array the entry keeps alive (0: unknown)


def moved_on(first: Sequence_[int], last: Sequence_[int], steps: int) -> bool:
    """Whether every row of ``last`` is ``steps`` past the same row of ``first``. In Python:
    ``np.array_equal`` over two 64-row arrays cost ~65 us at a flush, cold."""
    return len(first) == len(last) and all(b == a + steps for a, b in zip(first, last, strict=True))


def positions_and_chains(
    pending: list[PendingContent], stamped: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """The positions and writer chains of every pending slot, in write order (chains
    ``None`` when none was deferred). A run of decode steps of the same readers (the runner
    passes the same list while the batch is unchanged), each moving every reader on by one
    token, takes three array ops and a slice per reader, however many steps it spans;
    other steps one conversion each (chains stamped at the write are read back: a stamp a
    clear has since replaced is dropped by ``apply_content`` anyway; ``stamped``: the sidecar's
    chains)."""
    deferred = any(p.readers is not None for p in pending)
    positions: list[np.ndarray] = []
    chains: list[np.ndarray] = []
    start = 0
    while start < len(pending):
        entry, end = pending[start], start + 1
        first = np.asarray(entry.positions, dtype=np.int64)
        if entry.readers is not None:
            while end < len(pending) and pending[end].readers is entry.readers:
                end += 1
            steps = end - start
            if steps > 1 and moved_on(entry.positions, pending[end - 1].positions, steps - 1):
                positions.append((first + np.arange(steps)[:, None]).reshape(-1))
                chains.append(run_chains(entry.readers, entry.positions, steps))
                start = end
                continue
            end = start + 1  # not one token a step: this step alone
            chains.append(token_chains(entry.readers, entry.positions))
        elif deferred:
            chains.append(stamped[entry.slots])
        positions.append(first)
        start = end
    joined = positions[0] if len(positions) == 1 else np.concatenate(positions)
    if not deferred:
        return joined, None
    return joined, chains[0] if len(chains) == 1 else np.concatenate(chains)


class Readers:
    """The sequences the previous steps read with, for a decode step's epochs (see the module
    docstring). ``walk`` is the fast path of ``walk_reference`` for single-token steps."""

    def __init__(self) -> None:
        self._seqs: list[Sequence] | None = None  # the previous decode step's, in batch order
        self._base = -1  # the epoch written to their ``integrity_epoch`` when they were recorded
        self._epoch = -1  # the epoch they have all reached since (written out by ``settle``)

    def settle(self) -> None:
        """Write the recorded sequences' epochs out (a sequence reset since, to -1 by a
        preemption or a failed check, keeps its reset) and forget them."""
        if self._seqs is not None:
            base, epoch = self._base, self._epoch
            for seq in self._seqs:
                if seq.integrity_epoch == base:
                    seq.integrity_epoch = epoch
            self._seqs = None

    def walk(
        self,
        scheduled: list[ScheduledSeq],
        positions: list[int],
        epoch: int,
        page_size: int,
    ) -> Walk:
        """``walk_reference`` for a step of single tokens (entry i is batch row i, at
        ``positions[i]``), with the chains of non-first tokens left to the flush (``readers``)
        and no chain buffers collected (a check that needs them collects them)."""
        seqs = [s.seq for s in scheduled]
        epochs = [seq.integrity_epoch for seq in seqs]
        # The same sequences (element identity: a pointer comparison each), none reset since
        # (a preemption or a failed check writes -1): all passed at the previous step.
        if (
            seqs == self._seqs
            and self._epoch == epoch - 1
            and epochs.count(self._base) == len(epochs)
        ):
            seqs = self._seqs
            epochs = [epoch - 1] * len(seqs)
        else:
            self.settle()
            epochs = [seq.integrity_epoch for seq in seqs]
            for seq in seqs:
                seq.integrity_epoch = epoch
            self._seqs, self._base = seqs, epoch
        self._epoch = epoch
        firsts = [row for row, position in enumerate(positions) if not position % page_size]
        # Python ints for a few rows (array ops each cost more here): the page each starts is
        # its block table's entry for the position, as ``PagedBatch.build`` maps it.
        first_slots = [
            seqs[row].block_table[positions[row] // page_size] * page_size for row in firsts
        ]
        first_chains = [seqs[row].chain_buffer.item(positions[row]) for row in firsts]
        return Walk(None, epochs, None, firsts, True, first_slots, first_chains, seqs)
