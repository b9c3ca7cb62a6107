"""One account's large KV values must not stall other accounts' writes: the writer shares its
time by bytes, not by writes. On a real SQLite file with the store's real writer thread, a
large write is held inside its commit with an Event while more writes queue, and the order in
which writes commit is recorded. Nothing here measures time."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from ember.bindings.kv.async_store import AsyncKVStore
from ember.bindings.kv.fair_writer import WRITE_COST, FairWriter
from ember.bindings.kv.records import KVPut, KVWriteOp
from ember.bindings.kv.store import KVStore

LARGE = b"x" * 2_000_000  # past a group's byte bound: committed alone
STUCK_SECONDS = 60  # reached only if the held write never started (the test failed)


class Recorder:
    """The store's ``apply`` / ``apply_group``, recording the keys each commit held (in commit
    order) and holding the commit of ``hold_key`` until ``release`` is set."""

    def __init__(self, store: KVStore, hold_key: str) -> None:
        self.commits: list[list[str]] = []
        self.holding, self.release = threading.Event(), threading.Event()
        self._store, self._hold_key = store, hold_key
        self._apply, self._apply_group = store.apply, store.apply_group

    def apply(self, op: KVWriteOp) -> None:
        self._hold([op])
        self._apply(op)
        self.commits.append(_keys([op]))

    def apply_group(self, ops: Sequence[KVWriteOp]) -> list[BaseException | None]:
        self._hold(ops)
        outcomes = self._apply_group(ops)
        self.commits.append(_keys(ops))
        return outcomes

    def _hold(self, ops: Sequence[KVWriteOp]) -> None:
        if self._hold_key in _keys(ops):
            self.holding.set()
            self.release.wait(STUCK_SECONDS)

    def order(self) -> list[str]:
        return [key for commit in self.commits for key in commit]


def _keys(ops: Sequence[KVWriteOp]) -> list[str]:
    return [w.key for op in ops if isinstance(op, KVPut) for w in op.writes]


def _store(tmp_path: Path, hold_key: str) -> tuple[AsyncKVStore, Recorder]:
    store = KVStore(tmp_path / "kv.sqlite3")
    store.ensure_namespace("ns-a", "a", "acct-a")
    store.ensure_namespace("ns-b", "b", "acct-b")
    recorder = Recorder(store, hold_key)
    store.apply = recorder.apply  # type: ignore[method-assign]
    store.apply_group = recorder.apply_group  # type: ignore[method-assign]
    return AsyncKVStore(store), recorder


def test_a_small_write_waits_for_the_large_write_being_committed_not_the_next(
    tmp_path: Path,
) -> None:
    """B's large write is being committed, B has three more queued, then A's small write
    arrives: A's commits right after the one in progress, before B's second."""
    kv, recorder = _store(tmp_path, "b0")

    async def scenario() -> None:
        first = asyncio.ensure_future(kv.put("acct-b", "ns-b", "b0", LARGE))
        await asyncio.to_thread(recorder.holding.wait, STUCK_SECONDS)  # inside b0's commit
        queued = [
            asyncio.ensure_future(kv.put("acct-b", "ns-b", f"b{i}", LARGE)) for i in (1, 2, 3)
        ]
        await asyncio.sleep(0)  # B's writes are queued before A's
        victim = asyncio.ensure_future(kv.put("acct-a", "ns-a", "a0", b"small"))
        await asyncio.sleep(0)
        recorder.release.set()
        await asyncio.gather(first, *queued, victim)

    try:
        asyncio.run(scenario())
    finally:
        kv.close()
    assert recorder.order() == ["b0", "a0", "b1", "b2", "b3"]


def test_an_account_that_wrote_a_large_value_waits_until_others_small_writes_went(
    tmp_path: Path,
) -> None:
    """Turns are shared by bytes: B's next large write waits for A's several small ones,
    though A's were queued after it, and each account's writes keep their order."""
    kv, recorder = _store(tmp_path, "b0")

    async def scenario() -> None:
        first = asyncio.ensure_future(kv.put("acct-b", "ns-b", "b0", LARGE))
        await asyncio.to_thread(recorder.holding.wait, STUCK_SECONDS)
        queued = [asyncio.ensure_future(kv.put("acct-b", "ns-b", "b1", LARGE))]
        await asyncio.sleep(0)
        queued += [
            asyncio.ensure_future(kv.put("acct-a", "ns-a", f"a{i}", b"small")) for i in range(5)
        ]
        await asyncio.sleep(0)
        recorder.release.set()
        await asyncio.gather(first, *queued)

    try:
        asyncio.run(scenario())
    finally:
        kv.close()
    assert recorder.order() == ["b0", "a0", "a1", "a2", "a3", "a4", "b1"]


def test_a_large_write_is_committed_alone(tmp_path: Path) -> None:
    """Small writes queued on both sides of a large one are grouped among themselves; the
    large one's commit holds nothing else."""
    kv, recorder = _store(tmp_path, "a0")

    async def scenario() -> None:
        first = asyncio.ensure_future(kv.put("acct-a", "ns-a", "a0", b"small"))
        await asyncio.to_thread(recorder.holding.wait, STUCK_SECONDS)
        queued = [
            asyncio.ensure_future(kv.put("acct-a", "ns-a", "a1", b"small")),
            asyncio.ensure_future(kv.put("acct-b", "ns-b", "b0", LARGE)),
            asyncio.ensure_future(kv.put("acct-a", "ns-a", "a2", b"small")),
        ]
        await asyncio.sleep(0)
        recorder.release.set()
        await asyncio.gather(first, *queued)

    try:
        asyncio.run(scenario())
    finally:
        kv.close()
    assert ["b0"] in recorder.commits
    assert sorted(recorder.order()) == ["a0", "a1", "a2", "b0"]


def _reference_order(jobs: Sequence[tuple[str, int]]) -> list[int]:
    """The order the writer serves ``jobs`` (owner, size) queued at once, from the definition:
    each job in turn of the bytes its owner queued before it (``WRITE_COST`` more per job),
    the earlier queued first on a tie. Slow and plain, to hold the heap's order to."""
    before: list[int] = []
    spent: dict[str, int] = {}
    for owner, size in jobs:
        before.append(spent.get(owner, 0))
        spent[owner] = before[-1] + size + WRITE_COST
    return sorted(range(len(jobs)), key=lambda index: (before[index], index))


@pytest.mark.parametrize("round_", range(6))
def test_the_writers_order_is_the_reference_order_on_random_workloads(round_: int) -> None:
    seed = random.randrange(2**32)  # fresh each run; printed on failure to replay it
    rng = random.Random(seed)
    owners = [f"acct-{i}" for i in range(rng.randint(1, 6))]
    sizes = [0, 10, 300, 70_000, 2_000_000, 25 * 1024 * 1024]
    jobs = [(rng.choice(owners), rng.choice(sizes)) for _ in range(rng.randint(1, 300))]
    writer = FairWriter("test-kv-write")
    gate = threading.Event()
    order: list[int] = []
    writer.submit("gate", lambda: gate.wait(STUCK_SECONDS))
    futures = [
        writer.submit(owner, lambda index=index: order.append(index), size=size)
        for index, (owner, size) in enumerate(jobs)
    ]
    gate.set()
    for future in futures:
        future.result(STUCK_SECONDS)
    writer.shutdown()
    assert order == _reference_order(jobs), f"seed {seed}"
