"""When KV pages are checked, and what a failed check means for a request (torch-free).

Stamps (``kv/integrity.py``) are written by every forward: the writer's chain and position before
it, the content digest after it. Checks are reported after the forward and *before any sampled
token is emitted*, so a request whose step read bad KV drops that step's token and recomputes
(sampled mode's ownership check runs before the forward, once the chains are stamped: nothing it
reads changes during the forward; its content sample is summed by the attention from its own page
gathers, ``PageSample``, with only the layers no gather read taken from memory):

- ``full``: every slot each scheduled sequence can read (its whole context, padding included) is
  checked for ownership (chain) and content (digest), every step.
- ``sampled``: ownership of the first slot of every page restamped since its reader last passed
  a check, every step (a page handed to another request is zeroed and rewritten from its first
  slot, so this catches every early reuse the step it could matter); ownership and content of
  every slot of a rotating share of the pages, chosen by pool index: every ``CONTENT_STRIDE``
  steps, the pages whose index is congruent to ``step // CONTENT_STRIDE`` modulo
  ``sample_period // CONTENT_STRIDE``. A page read at every step is so re-checked once every
  ``sample_period`` steps (a flipped bit is found within that many steps); averaged over steps, a
  given page is checked with probability ``1 / sample_period`` per step (the whole-page digest of
  a checked page always detects one flipped bit). Bursts rather than a few pages every step:
  each check's fixed costs (~20 numpy calls, each several microseconds with the caches cold
  after a forward) are paid once per ``CONTENT_STRIDE`` steps.
- Always (both modes): every page a prefix-cache hit would reuse is verified before reuse.

A chain mismatch means the page now belongs to someone else: the reader drops it from its block
table without freeing it. A digest mismatch means the bytes were damaged: the page is dropped from
the prefix cache and every sequence holding it recomputes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ember.models.kv.integrity import KVSidecar

# Sampled mode digests whole pages every this many steps (see ``_check_sampled``).
CONTENT_STRIDE = 8


@dataclass(slots=True)
class IntegrityStats:
    slots_checked: int = 0  # ownership checks
    slots_digested: int = 0  # content re-digests
    failures: int = 0  # sequences that failed a check during a step
    reuse_failures: int = 0  # prefix-cache pages that failed before reuse (block manager)
    # Process CPU time spent stamping and checking around the forward (the per-layer digest
    # sums inside the forward are not included: a few small int64 sums per layer).
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

    entries: np.ndarray  # (n,) flat ``row * P + col`` positions in ``StepReads.pages``
    digest: np.ndarray  # (n,) uint64: the gathered layers' share of each page's digest
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


class IntegrityChecker:
    """Runs the checks for one pool, per the configured mode."""

    def __init__(self, sidecar: KVSidecar, page_size: int, mode: str, sample_period: int) -> None:
        self.sidecar = sidecar
        self.page_size = page_size
        self.mode = mode
        self.sample_period = sample_period
        self.stats = IntegrityStats()
        self._offsets = np.arange(page_size, dtype=np.int64)

    # -- PageVerifier (the block manager calls this before reusing a cached page) -------------

    def verify_page(self, page: int, expected_chain: np.ndarray) -> bool:
        slots = page * self.page_size + self._offsets
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

    def content_sample(self, pages: np.ndarray, step: int) -> np.ndarray | None:
        """Flat positions in ``pages`` (B, P) whose content sampled mode checks at ``step``
        (``None``: none this step, or full mode, which re-reads everything from memory)."""
        if self.mode != "sampled":
            return None
        stride = min(CONTENT_STRIDE, self.sample_period)
        if step % stride:
            return None
        windows = max(1, self.sample_period // stride)
        return np.flatnonzero(pages % windows == (step // stride) % windows)

    def check_step(self, reads: list[StepReads], step: int) -> list[IntegrityFailure]:
        failures: list[IntegrityFailure] = []
        for group in reads:
            if self.mode == "full":
                failures.extend(self._check_full(group))
            else:
                failures.extend(self._check_sampled(group, step))
        self.stats.failures += len(failures)
        return failures

    def _expected(self, group: StepReads, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """``(n, S)`` chains the readers expect in page column ``cols[i]`` of row ``rows[i]``."""
        # Vectorised over entries: every reader's chain laid end to end, then one gather (a loop
        # over entries cost ~2 us each; full mode checks hundreds per step).
        lens = np.asarray(group.seq_lens, dtype=np.int64)
        flat = np.concatenate(
            [chain[:n] for chain, n in zip(group.chains, group.seq_lens, strict=True)]
        )
        starts = np.cumsum(lens) - lens
        position = cols[:, None] * self.page_size + self._offsets  # (n, S) within the sequence
        valid = position < lens[rows, None]
        index = np.where(valid, starts[rows, None] + position, 0)
        if flat.size == 0:
            return np.zeros(position.shape, dtype=np.uint64)
        return np.where(valid, flat[index], np.uint64(0))

    def _check_full(self, group: StepReads) -> list[IntegrityFailure]:
        """Every slot of every page read: ownership and content."""
        num_rows, num_cols = group.pages.shape
        rows = np.repeat(np.arange(num_rows), num_cols)
        cols = np.tile(np.arange(num_cols), num_rows)
        return self._check_pages(group, rows, cols, content=True)

    def check_ownership(self, reads: list[StepReads]) -> None:
        """Sampled mode's per-step ownership check, run ahead of ``check_step`` (the runner does
        it before the forward, once this step's chains are stamped: nothing it reads changes
        during the forward); ``check_step`` reports what it found."""
        if self.mode != "sampled":
            return
        for group in reads:
            group.owner_bad = self._owner_bad(group)
            group.owner_checked = True

    def _owner_bad(self, group: StepReads) -> np.ndarray | None:
        """``(B, P)`` pages whose first slot another sequence wrote (``None`` if none)."""
        size, sidecar = self.page_size, self.sidecar
        pages = group.pages
        # A page changes hands only by being cleared and rewritten; both restamp its epoch. So
        # each reader re-checks the first slot of just the pages restamped since its last check.
        changed = sidecar.page_epoch[pages] >= group.checked_epoch[:, None]  # (B, P)
        rows, cols = np.nonzero(changed)
        self.stats.slots_checked += len(rows)
        owner_bad = None
        if len(rows):
            expected = np.zeros(len(rows), dtype=np.uint64)
            for i, (row, col) in enumerate(zip(rows.tolist(), cols.tolist(), strict=True)):
                if col * size < group.seq_lens[row]:
                    expected[i] = group.chains[row][col * size]
            bad = sidecar.chain[pages[rows, cols] * size] != expected
            if bad.any():
                owner_bad = np.zeros(pages.shape, dtype=bool)
                owner_bad[rows[bad], cols[bad]] = True
        return owner_bad

    def _check_sampled(self, group: StepReads, step: int) -> list[IntegrityFailure]:
        """Ownership of every changed page's first slot; everything on a rotating sample."""
        size, sidecar = self.page_size, self.sidecar
        pages = group.pages
        owner_bad = group.owner_bad if group.owner_checked else self._owner_bad(group)
        failures: list[IntegrityFailure] = []
        gathered = group.gathered
        if gathered is not None:  # the attention summed the sample from its gathers
            rows, cols = np.divmod(gathered.entries, pages.shape[1])
            digest = gathered.digest
            if gathered.missing:
                digest = digest + sidecar.page_digest(pages[rows, cols], gathered.missing)
            failures = self._check_pages(group, rows, cols, content=True, digest=digest)
        else:
            entries = self.content_sample(pages, step)
            if entries is not None:
                rows, cols = np.divmod(entries, pages.shape[1])
                failures = self._check_pages(group, rows, cols, content=True)
        if owner_bad is not None:
            failed = {f.seq_index for f in failures}
            for row, col in zip(*np.nonzero(owner_bad), strict=True):
                index = group.seq_index[int(row)]
                if index in failed:
                    continue  # already reported (the same page in this step's sample)
                failed.add(index)
                page = int(pages[row, col])
                failures.append(
                    IntegrityFailure(
                        seq_index=index,
                        disowned_pages=frozenset(int(p) for p in pages[row][owner_bad[row]]),
                        corrupt_pages=frozenset(),
                        first_bad_slot=page * size,
                        detail=self._detail(
                            page * size, int(col) * size, "written by another sequence"
                        ),
                    )
                )
        return failures

    def _check_pages(
        self,
        group: StepReads,
        rows: np.ndarray,
        cols: np.ndarray,
        *,
        content: bool,
        digest: np.ndarray | None = None,
    ) -> list[IntegrityFailure]:
        """Ownership (and content) of every slot of the pages at (``rows``, ``cols``); content
        from ``digest`` (each page's digest of its bytes) if given, else read from memory."""
        if len(rows) == 0:
            return []
        size, sidecar = self.page_size, self.sidecar
        page_ids = group.pages[rows, cols]
        slots = page_ids[:, None] * size + self._offsets  # (n, S)
        chain_bad = sidecar.chain[slots] != self._expected(group, rows, cols)
        self.stats.slots_checked += slots.size
        changed = None
        if content:
            # Whole pages at once: a changed bit changes its page's sum of slot digests. (A page
            # two readers share is digested twice: rarer and cheaper than deduplicating.)
            self.stats.slots_digested += slots.size
            if digest is None:
                digest = sidecar.page_digest(page_ids)
            changed = digest != sidecar.stamped_page_digest(page_ids)
        if not chain_bad.any() and (changed is None or not changed.any()):
            return []  # the common case: no per-row work
        digest_bad = np.zeros(slots.shape, dtype=bool)
        if changed is not None:
            digest_bad[:, 0] = changed  # reported at the page's first slot
        bad = chain_bad | digest_bad
        failures = []
        for row in np.unique(rows[bad.any(axis=1)]).tolist():
            mine = rows == row
            row_bad, row_chain = bad[mine], chain_bad[mine]
            row_pages, row_cols = page_ids[mine], cols[mine]
            disowned = frozenset(int(p) for p in row_pages[row_chain.any(axis=1)])
            corrupt = frozenset(int(p) for p in row_pages[digest_bad[mine].any(axis=1)])
            which, offset = np.argwhere(row_bad)[0]
            slot = int(row_pages[which]) * size + int(offset)
            reason = "written by another sequence" if row_chain[which, offset] else "bytes changed"
            failures.append(
                IntegrityFailure(
                    seq_index=group.seq_index[row],
                    disowned_pages=disowned,
                    corrupt_pages=corrupt - disowned,
                    first_bad_slot=slot,
                    detail=self._detail(slot, int(row_cols[which]) * size + int(offset), reason),
                )
            )
        return failures

    def _detail(self, slot: int, position: int, reason: str) -> str:
        stamped = int(self.sidecar.position[slot])
        return f"slot {slot} (position {position}): {reason}; stamped position {stamped}"
