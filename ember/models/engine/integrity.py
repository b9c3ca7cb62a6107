"""When KV pages are checked, and what a failed check means for a request (torch-free).

Stamps (``kv/integrity.py``) are written by every forward: the writer's chain before it, the
content digest and position from the tensors the forward's stores wrote, computed for several
steps at once (``ContentStamps.flush``, ``integrity_stamps.py``) but always before any check
reads them. Checks are reported after the forward and *before any sampled token is emitted*, so
a request whose step read bad KV drops that step's token and recomputes (sampled mode's
ownership check runs before the forward, once the chains are stamped: nothing it reads changes
during the forward; its content sample is summed by the attention from its own page gathers,
``PageSample``, with only the layers no gather read taken from memory):

- ``full``: every slot each scheduled sequence can read (its whole context, padding included) is
  checked for ownership (chain) and content (digest), every step.
- ``sampled``: ownership of the first slot of every page restamped since its reader last passed
  a check, every step (a page handed to another request is zeroed and rewritten from its first
  slot, so this catches every early reuse the step it could matter; a decode step where only
  each restamped page's own new writer reads it settles this with one count, and one where no
  page was restamped since the stalest reader's check does nothing); ownership and content of
  every slot of a rotating share of the pages, chosen by page column (a page's position in its
  reader's page table, fixed for as long as it is read): every ``CONTENT_STRIDE`` steps, the
  columns congruent to ``step // CONTENT_STRIDE`` modulo ``sample_period // CONTENT_STRIDE``. A
  page read at every step is so re-checked once every ``sample_period`` steps (a flipped bit is
  found within that many steps); averaged over steps, a given page is checked with probability
  ``1 / sample_period`` per step (the whole-page digest of a checked page always detects one
  flipped bit). Bursts rather than a few pages every step: each check's fixed costs (~20 numpy
  calls, each several microseconds with the caches cold after a forward, and one op per layer
  gather summed) are paid once per ``CONTENT_STRIDE`` steps.
- Always (both modes): every page a prefix-cache hit would reuse is verified before reuse.

A chain mismatch means the page now belongs to someone else: the reader drops it from its block
table without freeing it. A digest mismatch means the bytes were damaged: the page is dropped from
the prefix cache and every sequence holding it recomputes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from ember.models.engine.integrity_native import NativeLoops
from ember.models.engine.integrity_stamps import ContentStamps
from ember.models.engine.integrity_types import (
    IntegrityFailure,
    IntegrityStats,
    StepReads,
)
from ember.models.kernels.integrity_ops import IntegrityOps
from ember.models.kv.integrity import KVSidecar

# Sampled mode digests whole pages every this many steps (see ``_check_sampled``). 16 rather
# than 8: the sample step's fixed costs (the flush's Python, the checks' ops, a sum per layer
# gather) are then paid half as often, for the same bytes (glm4-tiny, batch 64, staggered
# prompts: sampled share 1.52-1.57% -> 1.22-1.26%, interleaved A/B, load 2.7); the price is a
# sample step twice as dear (~2-3 ms on a 22 ms step) half as often.
CONTENT_STRIDE = 16


class IntegrityChecker(ContentStamps):
    """Runs the checks for one pool, per the configured mode.

    Content stamps are deferred (``ContentStamps``, ``integrity_stamps.py``): every check that
    reads a digest or a position flushes first, so no check ever sees a missing stamp; the
    flush runs at least every ``CONTENT_STRIDE`` steps (the sampled content checks) and
    whenever ``max_pending`` tokens wait.
    """

    def __init__(
        self,
        sidecar: KVSidecar,
        page_size: int,
        mode: str,
        sample_period: int,
        ops: IntegrityOps | None = None,
    ) -> None:
        super().__init__(sidecar, NativeLoops(ops, sidecar) if ops is not None else None)
        self.page_size = page_size
        self.mode = mode
        self.sample_period = sample_period
        self.stats = IntegrityStats()
        self._offsets = np.arange(page_size, dtype=np.int64)

    # -- PageVerifier (the block manager calls this before reusing a cached page) -------------

    def verify_page(self, page: int, expected_chain: np.ndarray) -> bool:
        if self._pending:  # outside the runner's timed region: count it here
            started = time.thread_time()
            self.flush()
            self.stats.cpu_seconds += time.thread_time() - started
        slots = page * self.page_size + self._offsets
        self.stats.slots_checked += len(slots)
        self.stats.slots_digested += len(slots)
        ok = self.sidecar.check(slots, expected_chain, content=True) is None
        if not ok:
            self.stats.reuse_failures += 1
        return ok

    # -- per step ----------------------------------------------------------------------------------

    def content_columns(self, num_pages: int, step: int) -> tuple[int, int] | None:
        """``(first, step)``: sampled mode checks the content of page columns ``first, first +
        step, ...`` of every reader at ``step`` (``None``: none this step, or full mode, which
        re-reads everything from memory). Columns rather than pool pages so that the attention
        sums the sample from a strided view of its gather; a page keeps its column in every
        reader's page table for as long as it is read, so it is re-checked as regularly."""
        if self.mode != "sampled":
            return None
        stride = min(CONTENT_STRIDE, self.sample_period)
        if step % stride:
            return None
        windows = max(1, self.sample_period // stride)
        first = (step // stride) % windows
        return (first, windows) if first < num_pages else None

    @staticmethod
    def _columns(
        num_rows: int, num_pages: int, first: int, step: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, cols)`` of every reader's page columns ``first, first + step, ...``, in the
        ``(B, n)`` order of ``PageSample.sums``."""
        picked = np.arange(first, num_pages, step)
        rows = np.repeat(np.arange(num_rows), len(picked))
        return rows, np.tile(picked, num_rows)

    def check_step(self, reads: list[StepReads], step: int) -> list[IntegrityFailure]:
        """Report this step's failures. Flushes the deferred content stamps when a content
        check runs (full mode; sampled mode's sample steps)."""
        failures: list[IntegrityFailure] = []
        if self.mode == "full" or any(
            r.gathered is not None or self.content_columns(r.pages.shape[1], step) for r in reads
        ):
            self.flush()
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

    def only_own_restamps(
        self, pages: np.ndarray, first_slots: Sequence[int], address: int = 0
    ) -> bool:
        """Decode fast path of ``check_ownership`` (``pages``: the step's page table, any
        shape), for a step whose readers all passed a
        check at the previous step: ``True`` when the only reads of a page restamped in this
        epoch are by the readers that wrote its first slot this step (``first_slots``, one per
        such reader, on distinct pages), which pass by construction: each expects its own
        chain there and just stamped it. ``False``: run ``check_ownership``.

        A count instead of a per-entry walk: one gather of the page table's page epochs, one
        compare, one count (the general check is ~10 array ops and a Python loop over the
        entries); one native call when ``address`` (of ``pages``' int64 data) is given."""
        sidecar = self.sidecar
        if sidecar.restamp_epoch < sidecar.epoch:
            return True  # nothing restamped in this epoch
        own = [int(slot) // self.page_size for slot in first_slots]
        if len(set(own)) != len(own):
            return False  # two writers of one page's first slot
        # Restamped in this epoch <=> stamped with it: epochs only grow (no marks to set/clear).
        if address and self.native is not None:
            hits = self.native.count_restamped(address, pages.size)
        else:
            hits = int(np.count_nonzero(sidecar.page_epoch[pages] == sidecar.epoch))
        return hits == len(own)

    def ownership_changed(self, stalest: int) -> bool:
        """Whether any page was restamped since ``stalest``, the oldest epoch at which one of
        this step's readers last passed a check. Page epochs only ever move up to the current
        epoch, so when none was, no reader has a page to re-check and ``check_ownership`` can
        be skipped (most decode steps: no page starts or changes hands)."""
        return self.sidecar.restamp_epoch >= stalest

    def _owner_bad(self, group: StepReads) -> np.ndarray | None:
        """``(B, P)`` pages whose first slot another sequence wrote (``None`` if none)."""
        size, sidecar = self.page_size, self.sidecar
        pages = group.pages
        # A page changes hands only by being cleared and rewritten; both restamp its epoch. So
        # each reader re-checks the first slot of just the pages restamped since its last check.
        checked = np.asarray(group.checked_epoch, dtype=np.int64)
        changed = sidecar.page_epoch[pages] >= checked[:, None]  # (B, P)
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
        size = self.page_size
        pages = group.pages
        owner_bad = group.owner_bad if group.owner_checked else self._owner_bad(group)
        failures: list[IntegrityFailure] = []
        gathered = group.gathered
        if gathered is not None:  # the attention summed the sample from its gathers
            first, stride = gathered.first, gathered.step
            digest = gathered.digest.reshape(-1)
            if gathered.missing:  # layers no gather read (a DSA indexer's): from memory
                digest = digest + self._missing_digest(pages, first, stride, gathered.missing)
            if self._columns_pass(group, first, stride, digest):  # one digest per sampled page
                self.stats.slots_checked += digest.size * size
                self.stats.slots_digested += digest.size * size
            else:  # the reference (and any failure's report)
                rows, cols = self._columns(*pages.shape, first, stride)
                failures = self._check_pages(group, rows, cols, content=True, digest=digest)
        else:
            plan = self.content_columns(pages.shape[1], step)
            if plan is not None:
                rows, cols = self._columns(*pages.shape, *plan)
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

    def _missing_digest(
        self, pages: np.ndarray, first: int, stride: int, parts: list[tuple[int, int]]
    ) -> np.ndarray:
        """``(B * n,)`` digests of the sampled columns' pages over the layers ``parts``."""
        if self.native is not None:  # (B, n) row-major: ``_columns``' order
            found = self.native.page_digest(pages[:, first::stride].reshape(-1), parts)
            if found is not None:
                return found
        rows, cols = self._columns(*pages.shape, first, stride)
        return self.sidecar.page_digest(pages[rows, cols], parts)

    def _columns_pass(self, group: StepReads, first: int, step: int, digest: np.ndarray) -> bool:
        """The native check of a gathered sample (``NativeLoops.columns_pass``): ``True`` when
        every sampled page passed; ``False`` when one failed or the path does not apply."""
        addresses, capacities = group.chain_addresses, group.chain_capacities
        if self.native is None or addresses is None or capacities is None:
            return False
        passed = self.native.columns_pass(
            group.pages, first, step, group.seq_lens, addresses, capacities, digest
        )
        return bool(passed)

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
        self.flush()  # the stamped position may still be pending (failures are rare)
        stamped = int(self.sidecar.position[slot])
        return f"slot {slot} (position {position}): {reason}; stamped position {stamped}"
