"""Scheduler: chunked prefill under a token budget, admission by pages, preemption, abort."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ember.models.engine.block_manager import BlockManager
from ember.models.engine.config import EngineConfig
from ember.models.engine.scheduler import Scheduler
from ember.models.engine.sequence import FinishReason, Sequence, SequenceStatus, StopCriteria

STOP = StopCriteria(max_tokens=100)
# Page mechanics without growth reservation (a ratio of 0 reserves only the prompt's pages).
NO_RESERVE: dict[str, object] = dict(init_new_token_ratio=0.0, min_new_token_ratio=0.0)
ROOT = Path(__file__).resolve().parents[3]


def _scheduler(num_pages: int, **options: object) -> Scheduler:
    config = EngineConfig(max_total_tokens=num_pages * 4, page_size=4, **options)
    return Scheduler(config, BlockManager(num_pages, 4, enable_prefix_cache=False))


def _advance(scheduler: Scheduler, sample: int = 7) -> None:
    """What the engine does after a forward: count computed tokens, append samples."""
    for entry in scheduler.schedule().scheduled:
        entry.seq.num_computed_tokens = entry.context_len + entry.num_new_tokens
        if entry.needs_sample:
            entry.seq.append_token(sample)


def test_chunked_prefill_respects_the_token_budget() -> None:
    scheduler = _scheduler(64, max_num_batched_tokens=8, max_num_seqs=4)
    long = Sequence(0, "long", list(range(20)), STOP)
    scheduler.add(long)
    chunks = []
    for _ in range(3):
        out = scheduler.schedule()
        chunks.append([(e.seq.request_id, e.num_new_tokens) for e in out.scheduled])
        for e in out.scheduled:
            e.seq.num_computed_tokens += e.num_new_tokens
    assert chunks == [[("long", 8)], [("long", 8)], [("long", 4)]]


def test_mixed_steps_put_decodes_first_and_fill_the_budget_with_prefill() -> None:
    scheduler = _scheduler(64, max_num_batched_tokens=8, max_num_seqs=4)
    scheduler.add(Sequence(0, "a", [1, 2, 3], STOP))
    _advance(scheduler)  # a: prefilled, one sampled token
    scheduler.add(Sequence(1, "b", list(range(20)), STOP))
    out = scheduler.schedule()
    assert [(e.seq.request_id, e.num_new_tokens) for e in out.scheduled] == [("a", 1), ("b", 7)]
    assert out.scheduled[0].needs_sample and not out.scheduled[1].needs_sample


def test_admission_waits_for_free_pages_and_max_num_seqs() -> None:
    scheduler = _scheduler(4, max_num_batched_tokens=64, max_num_seqs=2, **NO_RESERVE)
    for i in range(3):
        scheduler.add(Sequence(i, str(i), list(range(6)), STOP))  # 2 pages each
    out = scheduler.schedule()
    assert [e.seq.request_id for e in out.scheduled] == ["0", "1"]
    assert len(scheduler.waiting) == 1


def test_running_out_of_pages_preempts_the_newest_and_it_recomputes() -> None:
    scheduler = _scheduler(4, max_num_batched_tokens=64, max_num_seqs=4, **NO_RESERVE)
    old, new = Sequence(0, "old", [1, 2, 3, 4], STOP), Sequence(1, "new", [5, 6, 7, 8], STOP)
    scheduler.add(old)
    scheduler.add(new)
    _advance(scheduler)  # both prefilled: 1 page each, 5 tokens each
    for _ in range(5):
        _advance(scheduler)  # both decode into a second page, then need a third: no room
    assert new.status is SequenceStatus.WAITING and new.num_preemptions == 1
    assert new.num_computed_tokens == 0 and new.block_table == []
    assert old.status is SequenceStatus.RUNNING and len(old.block_table) == 3
    assert scheduler.waiting[0] is new, "the preempted sequence goes first in line"


def _serve(scheduler: Scheduler, requests: int, prompt: int, max_tokens: int) -> list[int]:
    """Run ``requests`` to ``max_tokens`` each, finishing them as the engine does; returns the
    number of running sequences after every step."""
    stop = StopCriteria(max_tokens=max_tokens, ignore_eos=True)
    for i in range(requests):
        scheduler.add(Sequence(i, str(i), [i] * prompt, stop))
    running = []
    for _ in range(10 * requests * (prompt + max_tokens)):
        if not scheduler.has_unfinished():
            return running
        _advance(scheduler)
        running.append(len(scheduler.running))
        for seq in list(scheduler.running):
            if seq.num_completion_tokens >= max_tokens:
                scheduler.finish(seq, FinishReason.LENGTH)
    raise AssertionError("the requests did not finish")


def test_admission_reserves_what_running_requests_will_need() -> None:
    # 16 pages of 4 tokens hold 4 whole requests (8 prompt + 8 new tokens: 15 cached = 4 pages).
    # Reserving every remaining token runs exactly 4 at a time and never preempts; reserving
    # only the prompt (the old admission) starts all 8 and then thrashes.
    reserving = _scheduler(
        16,
        max_num_batched_tokens=64,
        max_num_seqs=8,
        init_new_token_ratio=1.0,
        min_new_token_ratio=1.0,
    )
    running = _serve(reserving, requests=8, prompt=8, max_tokens=8)
    assert max(running) == 4 and reserving.num_preemptions == 0
    assert len(reserving.finished) == 8
    prompt_only = _scheduler(16, max_num_batched_tokens=64, max_num_seqs=8, **NO_RESERVE)
    running = _serve(prompt_only, requests=8, prompt=8, max_tokens=8)
    assert max(running) == 8 and prompt_only.num_preemptions > 0


def test_the_ratio_decays_without_preemptions_and_rises_after_one() -> None:
    scheduler = _scheduler(
        16,
        max_num_batched_tokens=64,
        max_num_seqs=8,
        init_new_token_ratio=0.7,
        min_new_token_ratio=0.1,
        new_token_ratio_decay_steps=3,
    )
    ratios = []
    stop = StopCriteria(max_tokens=8, ignore_eos=True)
    scheduler.add(Sequence(0, "alone", [1] * 4, stop))
    for _ in range(3):
        _advance(scheduler)
        ratios.append(round(scheduler.new_token_ratio, 6))
    assert ratios == [0.5, 0.3, 0.1]  # linear, then held at the minimum
    _advance(scheduler)
    assert scheduler.new_token_ratio == 0.1
    # At 0.1 the reservation is about the prompt alone: 7 more requests of 2 pages start, the
    # pool runs out as they grow, and the preemption lifts the ratio (here to 1: 20 more steps
    # exceed every request's max_tokens).
    for i in range(1, 8):
        scheduler.add(Sequence(i, str(i), [i] * 8, stop))
    lifted = []
    while scheduler.has_unfinished():
        _advance(scheduler)
        lifted.append(scheduler.new_token_ratio)
        for seq in list(scheduler.running):
            if seq.num_completion_tokens >= 8:
                scheduler.finish(seq, FinishReason.LENGTH)
    assert scheduler.num_preemptions > 0 and max(lifted) == 1.0


def test_abort_frees_pages_immediately() -> None:
    scheduler = _scheduler(8)
    seq = Sequence(0, "gone", list(range(10)), STOP)
    scheduler.add(seq)
    _advance(scheduler)
    assert scheduler.block_manager.num_free_pages == 5
    scheduler.abort(seq)
    assert scheduler.block_manager.num_free_pages == 8
    assert seq.finish_reason is FinishReason.ABORT and not scheduler.running


def test_a_request_larger_than_the_pool_fails_with_kv_cache_exhausted() -> None:
    scheduler = _scheduler(2)
    seq = Sequence(0, "huge", list(range(9)), STOP)
    scheduler.add(seq)
    assert scheduler.schedule().scheduled == []
    assert seq.finish_reason is FinishReason.ERROR and "KV cache" in str(seq.error)


def test_scheduling_modules_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import ember.models.engine.scheduler, ember.models.engine.block_manager\n"
        "import ember.models.engine.integrity, ember.models.kv.spec\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)[:5]\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env)
