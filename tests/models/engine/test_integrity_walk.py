"""The decode step's integrity bookkeeping (``integrity_walk``) against its references: the
remembered epochs against the plain walk over every sequence, after random batch changes,
preemptions and failed checks; the chains stamped at a flush against the sequences' chains."""

from __future__ import annotations

import random
from collections.abc import Iterable

import numpy as np
import pytest

from ember.models.attention.backend import BatchLayout
from ember.models.attention.paged_batch import PagedBatch
from ember.models.engine.config import EngineConfig
from ember.models.engine.integrity_walk import Readers, run_chains, token_chains, walk_reference
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.scheduler import ScheduledSeq
from ember.models.engine.sequence import Sequence, StopCriteria
from tests.models.engine.toy_models import ToyConfig, ToyModel

PAGE = 4


def _twins(rng: random.Random, count: int) -> tuple[list[Sequence], list[Sequence]]:
    """Two identical sets of sequences: one for the fast path, one for the reference."""
    prompts = [[rng.randrange(97) for _ in range(rng.randint(3, 12))] for _ in range(count)]
    make = lambda: [Sequence(i, str(i), p, StopCriteria(64)) for i, p in enumerate(prompts)]  # noqa: E731
    fast, ref = make(), make()
    for seqs in (fast, ref):
        _give_pages(seqs, range(count))
    return fast, ref


def _give_pages(seqs: list[Sequence], which: Iterable[int]) -> None:
    """Distinct pages enough for the whole test (as the block manager would hand them out)."""
    for i in which:
        seqs[i].block_table = [i * 200 + 3 * p + 1 for p in range(150)]


def test_remembered_epochs_equal_the_plain_walk_after_random_events() -> None:
    """Random decode steps over 12 sequences: the batch kept (most steps), reordered, shrunk or
    grown; sequences preempted (epoch reset) and readmitted, even into the very same batch;
    failed checks (the runner settles, then resets the failed). At every step the fast walk's
    epochs, page-start rows and their chains equal the reference's, and after ``settle``
    every sequence's epoch equals the reference's."""
    rng = random.Random(4)
    fast_seqs, ref_seqs = _twins(rng, 12)
    readers = Readers()
    batch = list(range(8))
    hits = 0
    for step in range(400):
        epoch = step + 1
        event = rng.random()
        if event < 0.1:
            batch = rng.sample(range(12), rng.randint(1, 12))
        elif event < 0.15:  # a preemption (possibly of a sequence that stays in the batch)
            victim = rng.choice(batch)
            fast_seqs[victim].reset_for_recompute()
            ref_seqs[victim].reset_for_recompute()
            _give_pages(fast_seqs, [victim])  # readmitted
            _give_pages(ref_seqs, [victim])
        fast = [ScheduledSeq(fast_seqs[i], 1, fast_seqs[i].num_tokens - 1) for i in batch]
        ref = [ScheduledSeq(ref_seqs[i], 1, ref_seqs[i].num_tokens - 1) for i in batch]
        positions = [s.context_len for s in fast]
        same = fast_seqs and readers._seqs == [s.seq for s in fast]
        got = readers.walk(fast, positions, epoch, PAGE)
        want = walk_reference(ref, epoch, PAGE)
        hits += bool(same and got.epochs == [epoch - 1] * len(batch))
        assert got.epochs == want.epochs
        assert got.firsts == want.firsts
        assert want.writer is not None and got.first_chains is not None
        assert got.first_chains == want.writer[want.firsts].tolist()
        # Page-start slots against the slot mapping the attention uses.
        layout = BatchLayout((1,) * len(batch), tuple(positions))
        tables = [fast_seqs[i].block_table for i in batch]
        mapping = PagedBatch.build(layout, tables, PAGE, padding_page=0).slot_mapping
        assert got.first_slots == mapping[want.firsts].tolist()
        assert np.array_equal(token_chains(got.readers or [], positions), want.writer)
        if rng.random() < 0.05:  # a failed check: the runner settles, then resets the failed
            readers.settle()
            row = rng.randrange(len(batch))
            fast[row].seq.integrity_epoch = ref[row].seq.integrity_epoch = -1
        for i in batch:
            token = rng.randrange(97)
            fast_seqs[i].append_token(token)
            ref_seqs[i].append_token(token)
        if rng.random() < 0.1:
            readers.settle()
            assert [s.integrity_epoch for s in fast_seqs] == [s.integrity_epoch for s in ref_seqs]
    readers.settle()
    assert [s.integrity_epoch for s in fast_seqs] == [s.integrity_epoch for s in ref_seqs]
    assert hits > 150  # the remembered path did most of the steps


def test_run_chains_equal_each_steps_token_chains() -> None:
    rng = random.Random(9)
    seqs, _ = _twins(rng, 6)
    first = [s.num_tokens - 1 for s in seqs]
    for _ in range(5):
        for seq in seqs:
            seq.append_token(rng.randrange(97))
    want = np.concatenate([token_chains(seqs, [p + j for p in first]) for j in range(5)])
    assert np.array_equal(run_chains(seqs, first, 5), want)


@pytest.fixture(scope="module", params=["gqa", "mla"])
def model(request: pytest.FixtureRequest) -> ToyModel:
    return ToyModel(ToyConfig(kind=request.param), seed=11)


def test_flushed_chains_equal_every_sequences_chain(model: ToyModel) -> None:
    """Engine level, against the sequences themselves: after any flush (of runs of decode steps
    whose non-first chains were deferred, mixed with prefill steps stamped at once), every
    slot a running request has computed carries its chain and position, and no check failed."""
    config = EngineConfig(
        max_total_tokens=400,
        page_size=PAGE,
        max_num_seqs=8,
        integrity="sampled",
        integrity_sample_period=1 << 10,
    )
    engine = LLMEngine(model, model.kv_layout(), config)
    checker, sidecar = engine.checker, engine.pool.sidecar
    assert checker is not None and sidecar is not None
    rng = random.Random(2)
    for i in range(6):
        prompt = [rng.randrange(97) for _ in range(rng.randint(3, 14))]
        engine.add_request(str(i), prompt, StopCriteria(max_tokens=rng.randint(4, 20)))
    compared = 0
    step = 0
    while engine.has_unfinished():
        engine.step()
        step += 1
        if step == 8:  # a late arrival: a prefill step between decode runs
            engine.add_request("late", [rng.randrange(97) for _ in range(9)], StopCriteria(6))
        if rng.random() < 0.6:
            continue  # let several steps wait for one flush
        checker.flush()
        for seq in engine.scheduler.running:
            positions = np.arange(seq.num_computed_tokens)
            table = np.array(seq.block_table, dtype=np.int64)
            slots = table[positions // PAGE] * PAGE + positions % PAGE
            assert np.array_equal(sidecar.chain[slots], seq.chain[: len(positions)])
            assert np.array_equal(sidecar.position[slots], positions.astype(np.int32))
            compared += len(slots)
    assert compared > 100 and engine.stats.integrity_failures == 0
