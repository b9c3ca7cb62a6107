"""KV integrity: injected faults are caught every time, and never reach the user.

(a) a flipped bit in a stored page; (b) a page handed to another request too early (freed while
still in use, then zeroed and overwritten by its new owner); (c) a flipped bit in a cached page
that a prefix hit is about to reuse.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from ember.errors import KVIntegrityError
from ember.models.engine.config import EngineConfig
from ember.models.engine.integrity import IntegrityChecker
from ember.models.engine.llm_engine import LLMEngine, RequestOutput
from ember.models.engine.sequence import Sequence, StopCriteria
from ember.models.kv.integrity import content_digest_reference
from tests.models.engine.toy_models import ToyConfig, ToyModel, greedy_reference

PAGE = 4


def _engine(model: ToyModel, integrity: str, **overrides: object) -> LLMEngine:
    options: dict = dict(
        max_total_tokens=400,
        page_size=PAGE,
        max_num_seqs=8,
        integrity=integrity,
        integrity_sample_period=4,
        max_integrity_retries=50,
    )
    options.update(overrides)
    return LLMEngine(model, model.kv_layout(), EngineConfig(**options))


def _collect(outputs: list[RequestOutput], into: dict[str, list[int]]) -> None:
    for output in outputs:
        if output.error is not None:
            raise output.error
        into.setdefault(output.request_id, []).extend(output.new_token_ids)


def _flip_random_bit(engine: LLMEngine, seq: Sequence, rng: random.Random) -> None:
    """Flip one bit of one cached entry ``seq`` has already written (any layer, any byte)."""
    pool = engine.pool
    position = rng.randrange(seq.num_computed_tokens)
    slot = seq.block_table[position // PAGE] * PAGE + position % PAGE
    cache = rng.choice(pool.caches)
    raw = pool.slot_bytes(cache, rng.randrange(cache.shape[0]), slot)  # (heads, bytes)
    head, byte, bit = rng.randrange(raw.shape[0]), rng.randrange(raw.shape[1]), rng.randrange(8)
    raw[head, byte] ^= 1 << bit


@pytest.fixture(scope="module", params=["gqa", "mla", "dsa"])
def case(request: pytest.FixtureRequest):
    model = ToyModel(ToyConfig(kind=request.param), seed=11)
    rng = random.Random(5)
    prompts = [[rng.randrange(97) for _ in range(rng.randint(5, 14))] for _ in range(4)]
    return model, prompts, [greedy_reference(model, p, 16) for p in prompts]


def test_flipped_bits_are_caught_at_the_next_step_in_full_mode(case) -> None:
    """Every flip is detected by the very next step, and outputs equal the fault-free reference."""
    model, prompts, want = case
    engine = _engine(model, "full")
    for i, prompt in enumerate(prompts):
        engine.add_request(str(i), prompt, StopCriteria(max_tokens=16))
    rng = random.Random(0)
    tokens: dict[str, list[int]] = {}
    injected = 0
    while engine.has_unfinished():
        running = [s for s in engine.scheduler.running if s.num_computed_tokens > 0]
        if running and injected < 12:
            before = engine.stats.integrity_failures
            _flip_random_bit(engine, rng.choice(running), rng)
            injected += 1
            _collect(engine.step(), tokens)
            assert engine.stats.integrity_failures > before, "a flipped bit went unnoticed"
        else:
            _collect(engine.step(), tokens)
    assert injected == 12
    assert [tokens[str(i)] for i in range(len(prompts))] == want


def test_flipped_bits_are_caught_within_the_sample_period_in_sampled_mode(case) -> None:
    model, prompts, _ = case
    engine = _engine(model, "sampled")
    for i, prompt in enumerate(prompts):
        engine.add_request(str(i), prompt, StopCriteria(max_tokens=16))
    rng = random.Random(1)
    tokens: dict[str, list[int]] = {}
    period = engine.config.integrity_sample_period
    for _ in range(8):
        running = [s for s in engine.scheduler.running if s.num_computed_tokens > PAGE]
        if not running:
            _collect(engine.step(), tokens)
            continue
        victim = rng.choice(running)
        before = engine.stats.integrity_failures
        _flip_random_bit(engine, victim, rng)
        for _ in range(period):
            _collect(engine.step(), tokens)
            if engine.stats.integrity_failures > before:
                break
        # Caught, unless the victim finished first (its pages were then never read again).
        assert engine.stats.integrity_failures > before or victim.is_finished
    while engine.has_unfinished():
        _collect(engine.step(), tokens)


def test_sample_digests_summed_in_the_gathers_equal_the_memory_reference(case, monkeypatch) -> None:
    """The fast path (sampled pages summed from the attention's page gathers, plus a memory
    read of the layers no gather covered) against the reference (every byte read from memory,
    and the slot-by-slot slow reference for one page), on the pages of random prompts."""
    model, prompts, _ = case
    engine = _engine(model, "sampled")
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
    for i, prompt in enumerate(prompts):
        engine.add_request(str(i), prompt + [rng.randrange(97)], StopCriteria(max_tokens=12))
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


@pytest.mark.parametrize("integrity", ["sampled", "full"])
def test_page_handed_out_too_early_is_caught_and_both_requests_stay_correct(
    case, integrity
) -> None:
    """Simulate the slot-reuse race of sglang #24226: a page is freed while its owner still decodes.

    The next request to allocate gets it (zeroed, then overwritten). The owner's check fails in
    that very step, its token is dropped and it recomputes; the new owner is unaffected.
    """
    model, prompts, want = case
    rng = random.Random(integrity == "full")
    for trial in range(2):
        engine = _engine(model, integrity)
        engine.add_request("victim", prompts[trial % 4], StopCriteria(max_tokens=16))
        tokens: dict[str, list[int]] = {}
        victim = engine._sequences["victim"]
        while (
            victim.num_computed_tokens < 2 * PAGE
            or victim.num_uncomputed_tokens != 1
            or (
                victim.num_computed_tokens + 1
                > len(victim.block_table) * PAGE  # would allocate now
            )
        ):
            _collect(engine.step(), tokens)
        manager = engine.block_manager
        page = rng.choice(victim.block_table)
        # The bug: drop the victim's reference early and put the page first in line for reuse.
        manager.pages[page].ref_count = 0
        manager._free = {page: None, **manager._free}
        other = prompts[(trial + 1) % 4]
        engine.add_request("other", other, StopCriteria(max_tokens=16))
        before = engine.stats.integrity_failures
        _collect(engine.step(), tokens)
        assert engine.stats.integrity_failures == before + 1, "the early reuse went unnoticed"
        while engine.has_unfinished():
            _collect(engine.step(), tokens)
        assert tokens["victim"] == want[trial % 4]
        assert tokens["other"] == want[(trial + 1) % 4]


@pytest.mark.parametrize("integrity", ["sampled", "full"])
def test_corrupted_cached_prefix_is_not_reused(case, integrity: str) -> None:
    model, prompts, want = case
    engine = _engine(model, integrity)
    long_prompt = prompts[0] + prompts[1]  # >= 10 tokens: at least two full cached pages
    assert engine.generate([long_prompt], StopCriteria(max_tokens=2))
    seq_pages = [p.page_id for p in engine.block_manager.pages if p.key is not None]
    assert seq_pages, "the finished request left full pages in the prefix cache"
    pool = engine.pool
    pool.slot_bytes(pool.caches[-1], 1, seq_pages[0] * PAGE + 2)[0, 3] ^= 0x10
    got = engine.generate([long_prompt], StopCriteria(max_tokens=6))
    assert got == [greedy_reference(model, long_prompt, 6)]
    assert engine.checker is not None and engine.checker.stats.reuse_failures == 1


def test_repeated_failures_end_the_request_with_kv_integrity_error() -> None:
    model = ToyModel(ToyConfig(kind="mla"), seed=2)
    engine = _engine(model, "full", max_integrity_retries=0)
    engine.add_request("r", list(range(9)), StopCriteria(max_tokens=20))
    engine.add_request("s", list(range(30, 37)), StopCriteria(max_tokens=20))
    outputs: list[RequestOutput] = []
    while engine._sequences["r"].num_computed_tokens < 5:
        outputs.extend(engine.step())
    _flip_random_bit(engine, engine._sequences["r"], random.Random(3))
    while engine.has_unfinished():
        outputs.extend(engine.step())
    final = [o for o in outputs if o.request_id == "r" and o.finished]
    assert len(final) == 1 and final[0].finish_reason == "error"
    assert isinstance(final[0].error, KVIntegrityError)
    assert "integrity" in str(final[0].error) and "'r'" in str(final[0].error)
    assert engine.stats.integrity_errors == 1
    other = [t for o in outputs if o.request_id == "s" for t in o.new_token_ids]
    assert other == greedy_reference(model, list(range(30, 37)), 20), (
        "the other request is unharmed"
    )


def test_sampled_check_catches_a_handover_that_happened_while_the_reader_was_not_scheduled() -> (
    None
):
    """Ownership is re-checked for every page restamped since the reader's last check, however
    many steps ago that was."""
    import numpy as np

    from ember.models.engine.integrity import IntegrityChecker
    from ember.models.engine.integrity_types import StepReads
    from ember.models.kv.integrity import CHAIN_SEED, chain_step
    from ember.models.kv.pool import KVPool
    from ember.models.kv.spec import KVSpec

    pool = KVPool(KVSpec("mla", 1, "bf16", kv_lora_rank=4, qk_rope_head_dim=4), 8, PAGE)
    sidecar = pool.sidecar
    assert sidecar is not None
    checker = IntegrityChecker(sidecar, PAGE, "sampled", sample_period=1 << 20)
    chain, value = [], CHAIN_SEED
    for position, token in enumerate(range(10, 18)):  # 8 tokens: pages 3 and 5
        value = chain_step(value, token, position)
        chain.append(value)
    chains = np.array(chain, dtype=np.uint64)
    slots = np.array([3 * PAGE + i for i in range(4)] + [5 * PAGE + i for i in range(4)])
    sidecar.stamp_tokens(slots, chains, np.arange(8, dtype=np.int32))
    reads = StepReads(np.array([[3, 5]]), [8], [chains], [0], np.array([-1]))
    assert checker.check_step([reads], step=1) == []
    sidecar.epoch = 5  # the reader last passed at epoch 1; four steps go by without it
    reads.checked_epoch = np.array([1])
    pool.zero_pages([5])  # the page is handed to someone else at epoch 5
    sidecar.epoch = 9
    failures = checker.check_step([reads], step=3)  # not a whole-page sampling step
    assert len(failures) == 1 and failures[0].disowned_pages == frozenset({5})


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


def test_deferred_content_stamps_equal_the_digests_of_memory(case) -> None:
    """The deferred stamps (several steps' written tensors digested in one flush: one stack per
    shape when the steps stored the same shapes, a concatenation otherwise; stamps of pages
    cleared since dropped) against the reference, every slot read back from memory: after
    every step's flush, every slot a running request has computed carries its memory digest."""
    model, prompts, _ = case
    engine = _engine(model, "sampled", integrity_sample_period=1 << 10)
    checker, sidecar = engine.checker, engine.pool.sidecar
    assert checker is not None and sidecar is not None
    rng = random.Random(3)
    for i, prompt in enumerate(prompts):
        engine.add_request(str(i), prompt + [rng.randrange(97)], StopCriteria(max_tokens=10))
    compared = 0
    while engine.has_unfinished():
        engine.step()
        if rng.random() < 0.5:
            continue  # let stamps of several steps wait for one flush
        checker.flush()
        for seq in engine.scheduler.running:
            positions = np.arange(seq.num_computed_tokens)
            table = np.array(seq.block_table, dtype=np.int64)
            slots = table[positions // PAGE] * PAGE + positions % PAGE
            assert np.array_equal(sidecar.digest[slots], sidecar.content_digest(slots))
            assert np.array_equal(sidecar.position[slots], positions.astype(np.int32))
            compared += len(slots)
    assert compared > 100 and engine.stats.integrity_failures == 0


def test_a_prefill_chunk_is_stamped_at_its_own_step(case) -> None:
    """A step that writes a prefill chunk digests its content stamps itself (no flush asked):
    a chunk's stamps left pending were digested at the first decode sample step, which then
    paid for a whole prefill. Against the reference: every prompt slot's stamp equals the
    digest of its bytes read from memory right after the prefill steps."""
    model, prompts, _ = case
    engine = _engine(model, "sampled", integrity_sample_period=1 << 10)
    sidecar = engine.pool.sidecar
    assert sidecar is not None
    engine.add_request("0", prompts[0], StopCriteria(max_tokens=4))
    engine.step()  # step 0 is a content sample step, which flushes anyway
    for i, prompt in enumerate(prompts[1:], 1):
        engine.add_request(str(i), prompt, StopCriteria(max_tokens=4))
    engine.step()  # step 1 (no sample): request 0 decodes, the others prefill
    compared = 0
    for seq in engine.scheduler.running:
        positions = np.arange(seq.num_computed_tokens)
        table = np.array(seq.block_table, dtype=np.int64)
        slots = table[positions // PAGE] * PAGE + positions % PAGE
        assert np.array_equal(sidecar.digest[slots], sidecar.content_digest(slots))
        compared += len(slots)
    assert compared >= sum(len(p) for p in prompts)


@pytest.mark.parametrize(
    "path", [pytest.param("kernel, buffer replaced", marks=pytest.mark.kernels), "torch stores"]
)
def test_stamps_summed_by_the_store_kernel_equal_the_digests_of_memory(case, path: str) -> None:
    """The store kernel's sums (``kernels/stored_sums.py``), kept in the runner's reused buffer
    between flushes, against the reference read back from memory; with a buffer too small for
    a flush window (replaced while steps wait: their runs no longer follow each other), and
    with the torch stores (the reference path, kernel off) for the same steps."""
    model, prompts, _ = case
    engine = _engine(model, "sampled", integrity_sample_period=1 << 10)
    checker, sidecar, runner = engine.checker, engine.pool.sidecar, engine.runner
    assert checker is not None and sidecar is not None
    if path == "torch stores":
        runner.workspace.store_kernel = None
    else:
        assert runner.workspace.store_kernel is not None, "the test machine has a C compiler"
    rng = random.Random(5)
    for i, prompt in enumerate(prompts):
        engine.add_request(str(i), prompt + [rng.randrange(97)], StopCriteria(max_tokens=12))
    compared = replaced = 0
    while engine.has_unfinished():
        if path != "torch stores" and rng.random() < 0.4:
            runner._sums = np.empty(1, dtype=np.int64)  # full: the next step replaces it
            replaced += 1
        engine.step()
        if rng.random() < 0.6:
            continue  # let stamps of several steps wait for one flush
        checker.flush()
        for seq in engine.scheduler.running:
            positions = np.arange(seq.num_computed_tokens)
            table = np.array(seq.block_table, dtype=np.int64)
            slots = table[positions // PAGE] * PAGE + positions % PAGE
            assert np.array_equal(sidecar.digest[slots], sidecar.content_digest(slots))
            compared += len(slots)
    assert compared > 100 and engine.stats.integrity_failures == 0
    assert path == "torch stores" or replaced > 2
