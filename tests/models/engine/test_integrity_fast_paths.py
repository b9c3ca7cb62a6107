"""KV integrity checks' fast paths against their references, on fresh random input: sampled page
digests summed in the attention's gathers (against memory and the slot-by-slot digest) and the
decode ownership count (against the per-entry ownership check)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ember.models.engine.integrity import IntegrityChecker
from ember.models.kv.integrity import content_digest_reference
from tests.models.engine.integrity_cases import KINDS, PAGE, add_extended, make_case, make_engine


@pytest.fixture(scope="module", params=KINDS)
def case(request: pytest.FixtureRequest):
    return make_case(request.param)


def test_sample_digests_summed_in_the_gathers_equal_the_memory_reference(case, monkeypatch) -> None:
    """The fast path (sampled pages summed from the attention's page gathers, plus a memory
    read of the layers no gather covered) against the reference (every byte read from memory,
    and the slot-by-slot slow reference for one page), on the pages of random prompts."""
    model, prompts, _ = case
    engine = make_engine(model, "sampled")
    sidecar, pool = engine.pool.sidecar, engine.pool
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    original = IntegrityChecker._check_pages

    def spy(self, group, rows, cols, *, content, digest=None):
        if digest is not None:
            seen.append((group.pages[rows, cols].copy(), digest.copy()))
        return original(self, group, rows, cols, content=content, digest=digest)

    native = IntegrityChecker._columns_pass

    def spy_native(self, group, first, step, digest):  # the same digests, checked natively
        rows, cols = IntegrityChecker._columns(*group.pages.shape, first, step)
        seen.append((group.pages[rows, cols].copy(), digest.copy()))
        return native(self, group, first, step, digest)

    monkeypatch.setattr(IntegrityChecker, "_check_pages", spy)
    monkeypatch.setattr(IntegrityChecker, "_columns_pass", spy_native)
    rng = random.Random(7)
    add_extended(engine, prompts, rng, 12)
    checked = 0
    while engine.has_unfinished():
        engine.step()
        checked += len(seen)
        for pages, digest in seen:
            assert np.array_equal(digest, sidecar.page_digest(pages))
            page = int(pages[0])
            slow = sum(
                content_digest_reference(
                    [
                        pool.slot_bytes(cache, row, page * PAGE + offset).numpy().reshape(-1)
                        for cache in pool.caches
                        for row in range(cache.shape[0])
                    ]
                )
                for offset in range(PAGE)
            ) % (1 << 64)
            assert int(digest[0]) == slow
        seen.clear()
    assert checked > 0 and engine.stats.integrity_failures == 0


def test_decode_ownership_fast_path_agrees_with_the_full_ownership_check() -> None:
    """``only_own_restamps`` (a count over marked pages) against ``check_ownership``'s per-entry
    check, on random page tables where some restamped pages are also read by other readers
    (an early handover) and some first-slot writers share a page: whenever the fast path
    passes a step, the reference finds nothing; whenever the reference finds a bad page, the
    fast path did not pass."""
    from ember.models.engine.integrity import IntegrityChecker
    from ember.models.engine.integrity_types import StepReads
    from ember.models.kv.pool import KVPool
    from ember.models.kv.spec import KVSpec

    rng = np.random.default_rng(0)
    num_pages, readers, width = 40, 6, 4
    passed = caught = 0
    for _ in range(300):
        pool = KVPool(KVSpec("mla", 1, "bf16", kv_lora_rank=4, qk_rope_head_dim=4), num_pages, PAGE)
        sidecar = pool.sidecar
        assert sidecar is not None
        checker = IntegrityChecker(sidecar, PAGE, "sampled", sample_period=1 << 20)
        sidecar.epoch = 3
        tables = rng.choice(num_pages - 1, size=(readers, width), replace=rng.random() < 0.3)
        chains = [rng.integers(1, 1 << 62, size=width * PAGE, dtype=np.uint64) for _ in tables]
        for table, chain in zip(tables, chains, strict=True):  # stamped before this epoch
            sidecar.chain[(table[:, None] * PAGE + np.arange(PAGE)).ravel()] = chain
        # This step: some readers start a new page (their last column), some pages are cleared.
        writers = np.flatnonzero(rng.random(readers) < 0.5)
        if rng.random() < 0.3:
            pool.zero_pages([int(p) for p in rng.choice(num_pages - 1, size=2)])
        first_slots = tables[writers, -1] * PAGE
        for row, slot in zip(writers, first_slots, strict=True):
            sidecar.stamp_writers(
                np.array([slot]), np.array([chains[row][(width - 1) * PAGE]]), np.array([slot])
            )
        reads = StepReads(
            pages=tables.astype(np.int64),
            seq_lens=[width * PAGE] * readers,
            chains=chains,
            seq_index=list(range(readers)),
            checked_epoch=np.full(readers, 3, dtype=np.int64),
        )
        fast = checker.only_own_restamps(reads.pages, first_slots)
        checker.check_ownership([reads])
        if fast:
            passed += 1
            assert reads.owner_bad is None
        if reads.owner_bad is not None:
            caught += 1
            assert not fast
    assert passed > 30 and caught > 30
