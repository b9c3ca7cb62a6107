"""The records the integrity checks pass between the engine and the checker (torch-free):
what a step's readers read (``StepReads``), a content sample summed in the attention's gathers
(``GatheredDigest``), a failed check (``IntegrityFailure``) and the running counts
(``IntegrityStats``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class IntegrityStats:
    slots_checked: int = 0  # ownership checks
    slots_digested: int = 0  # content re-digests
    failures: int = 0  # sequences that failed a check during a step
    reuse_failures: int = 0  # prefix-cache pages that failed before reuse (block manager)
    # Process CPU time spent stamping, digesting and checking: around the forward, in the
    # gathers' sample sums and in flushes outside it (the stores' list appends, a few Python
    # operations per layer, are not included).
    cpu_seconds: float = 0.0


@dataclass(slots=True)
class IntegrityFailure:
    """A sequence whose step read KV it must not trust."""

    seq_index: int  # index into the step's scheduled list
    disowned_pages: frozenset[int]  # written by another sequence
    corrupt_pages: frozenset[int]  # bytes changed since stamped
    first_bad_slot: int
    detail: str


@dataclass(slots=True)
class GatheredDigest:
    """Page digests of a content sample, summed by the attention from its page gathers."""

    first: int  # the sampled page columns: first, first + step, ... (``content_columns``)
    step: int
    digest: np.ndarray  # (B, n) uint64: the gathered layers' share of each sampled page's digest
    missing: list[tuple[int, int]]  # (cache, layer) no gather read: read them from memory


@dataclass(slots=True)
class StepReads:
    """What one attention group's sequences read this step."""

    pages: np.ndarray  # (B, P) int64 pool pages, padded with the (always zero) padding page
    seq_lens: list[int]  # tokens each sequence has cached after this step
    chains: list[np.ndarray]  # each sequence's token chain (read only up to its seq_len)
    seq_index: list[int] = field(default_factory=list)  # row -> index in the scheduled list
    # (B,) sidecar epoch of each sequence's last successful check (-1: never checked)
    checked_epoch: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    gathered: GatheredDigest | None = None  # this step's content sample, if summed in gathers
    # (B, P) pages that failed the sampled ownership check, when ``check_ownership`` ran
    # (``None``: all passed); ``owner_checked`` says whether it ran.
    owner_bad: np.ndarray | None = None
    owner_checked: bool = False
    chain_addresses: list[int] | None = None  # of ``chains`` (``Sequence.chain_address``)
    chain_capacities: list[int] | None = None  # their lengths (``Sequence.chain_capacity``)
