"""KV integrity: injected faults are caught every time, and never reach the user.

(a) a flipped bit in a stored page; (b) a page handed to another request too early (freed while
still in use, then zeroed and overwritten by its new owner); (c) a flipped bit in a cached page
that a prefix hit is about to reuse. The checks' fast paths against their references are in
``test_integrity_fast_paths.py``, the deferred content stamps in ``test_integrity_stamps.py``.
"""

from __future__ import annotations

import random

import pytest

from ember.errors import KVIntegrityError
from ember.models.engine.engine_types import RequestOutput
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import Sequence, StopCriteria
from tests.models.engine.integrity_cases import KINDS, PAGE, make_case, make_engine
from tests.models.engine.toy_models import ToyConfig, ToyModel, greedy_reference


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


@pytest.fixture(scope="module", params=KINDS)
def case(request: pytest.FixtureRequest):
    return make_case(request.param)


def test_flipped_bits_are_caught_at_the_next_step_in_full_mode(case) -> None:
    """Every flip is detected by the very next step, and outputs equal the fault-free reference."""
    model, prompts, want = case
    engine = make_engine(model, "full")
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
    engine = make_engine(model, "sampled")
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
        engine = make_engine(model, integrity)
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
    engine = make_engine(model, integrity)
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
    engine = make_engine(model, "full", max_integrity_retries=0)
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
