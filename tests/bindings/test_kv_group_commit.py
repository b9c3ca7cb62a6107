"""Group commit against the one-write-at-a-time reference: fresh random workloads of puts (with
expirations, some already past, and metadata), deletes and housekeeping jobs from several
accounts, some refused (over the account's quota, past the temporary accounts' pool, into a
namespace the platform does not know, or whose pool source fails like a database does), queued
at once on two real SQLite stores; one writer commits each on its own, the other commits the
queued writes in groups. Every write's outcome and both stores' final contents must be equal,
and groups must have formed. Nothing measures time: the writers are held at a gate until the
whole workload is queued."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from ember.bindings.kv.fair_writer import FairWriter, GroupCommit
from ember.bindings.kv.records import (
    KVDelete,
    KVExpire,
    KVPool,
    KVPut,
    KVQuota,
    KVWrite,
    KVWriteOp,
)
from ember.bindings.kv.store import KVStore

NOW = 1_800_000_000.0
OWNERS = ("acct-a", "acct-b", "acct-c", "")
NAMESPACES = {"ns-a": "acct-a", "ns-b": "acct-b", "ns-c": "acct-c"}
KEYS = [f"k{i}" for i in range(12)] + ["\u00e9", "dir/x:1"]
STUCK_SECONDS = 120  # reached only if a writer never finished (the test failed)


class Pool:
    """A temporary accounts' pool source: a cap with most of it used outside KV."""

    def __init__(self, outside: int) -> None:
        self.outside = outside

    def kv_pool(self) -> KVPool:
        return KVPool(40_000, self.outside, "platform.temporary.max_total_stored_bytes")


class BrokenPool:
    """A pool source whose database fails: a failure of the database, not a refusal."""

    def kv_pool(self) -> KVPool:
        raise sqlite3.OperationalError("database is locked")


def _write(rng: random.Random) -> KVWrite:
    expiration = rng.choice([None, None, int(NOW) + 600, int(NOW) - 5])  # past: invisible
    metadata = rng.choice([None, f'{{"v": {rng.randrange(100)}}}', '"text"'])
    # Now and then one past every group's byte bound: committed alone, and it moves its
    # owner's later writes behind the other owners' (the writer shares its time by bytes).
    value = rng.randbytes(rng.choice([0, 10, 300, 3_000, 9_000, 0, 10, 300, 3_000, 1_100_000]))
    return KVWrite(rng.choice(KEYS), value, expiration, metadata)


def _op(rng: random.Random, owner: str) -> KVWriteOp:
    namespace = rng.choice([*NAMESPACES, "ns-dev", "ns-gone"]) if owner else "ns-dev"
    if rng.random() < 0.3:
        return KVDelete(namespace, tuple(rng.choice(KEYS) for _ in range(rng.randint(1, 3))))
    account = NAMESPACES.get(namespace)
    quota = KVQuota(account, 25_000) if account else None
    pool: Any = None
    if quota is not None and rng.random() < 0.2:
        pool = BrokenPool() if rng.random() < 0.3 else Pool(rng.choice([0, 30_000]))
    writes = tuple(_write(rng) for _ in range(rng.choice([1, 1, 1, 2, 4])))
    return KVPut(namespace, writes, quota, pool, registered_only=namespace != "ns-dev")


def _workload(rng: random.Random, count: int) -> list[tuple[str, KVWriteOp | str]]:
    """(owner, a key write or the key of a housekeeping job: removing it if expired)."""
    jobs: list[tuple[str, KVWriteOp | str]] = []
    for _ in range(count):
        owner = rng.choice(OWNERS)
        if rng.random() < 0.05:
            jobs.append((owner, rng.choice(KEYS)))
        else:
            jobs.append((owner, _op(rng, owner)))
    return jobs


def _store(path: Path) -> KVStore:
    store = KVStore(path, clock=lambda: NOW)
    for namespace, account in NAMESPACES.items():
        store.ensure_namespace(namespace, namespace, account, temporary=account == "acct-c")
    store.ensure_namespace("ns-dev", "dev", None)
    return store


def _run(
    store: KVStore, jobs: Sequence[tuple[str, KVWriteOp | str]], group: GroupCommit | None
) -> list[str | None]:
    """Queue every job behind a gate, open it, and return each job's outcome."""
    writer = FairWriter("test-kv-write", group)
    gate = threading.Event()
    writer.submit("gate", lambda: gate.wait(STUCK_SECONDS))
    futures: list[Future[Any]] = []
    for owner, job in jobs:
        if isinstance(job, str):
            key = job
            expire = KVExpire("ns-dev", key)  # as AsyncKVStore.get queues it
            futures.append(
                writer.submit(
                    owner,
                    lambda k=key: store.remove_expired("ns-dev", k),
                    item=expire,
                    size=expire.size(),
                )
            )
        else:
            futures.append(
                writer.submit(owner, lambda op=job: store.apply(op), item=job, size=job.size())
            )
    gate.set()
    outcomes = []
    for future in futures:
        error = future.exception(STUCK_SECONDS)
        outcomes.append(None if error is None else f"{type(error).__name__}: {error}")
    writer.shutdown()
    return outcomes


def _contents(store: KVStore) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    db = sqlite3.connect(store.path)
    try:
        rows = db.execute("SELECT * FROM kv ORDER BY namespace, key").fetchall()
        namespaces = db.execute("SELECT id, bytes FROM namespaces ORDER BY id").fetchall()
    finally:
        db.close()
    return rows, namespaces


def _counting(
    run: Callable[[Sequence[Any]], Any], sizes: list[int], kinds: set[str] | None = None
) -> Callable[..., Any]:
    def counted(items: Sequence[Any]) -> Any:
        sizes.append(len(items))
        if kinds is not None and len(items) > 1:
            kinds.update(type(item).__name__ for item in items)
        return run(items)

    return counted


@pytest.mark.parametrize("round_", range(4))
def test_grouped_commits_give_every_write_the_outcome_and_the_store_the_contents_of_one_at_a_time(
    tmp_path: Path, round_: int
) -> None:
    seed = random.randrange(2**32)  # fresh each run; printed on failure to replay it
    rng = random.Random(seed)
    jobs = _workload(rng, rng.randint(150, 400))
    max_jobs, max_bytes = rng.choice([2, 8, 64]), rng.choice([4_000, 20_000, 1 << 20])
    reference, grouped = _store(tmp_path / "one.sqlite3"), _store(tmp_path / "group.sqlite3")
    sizes: list[int] = []
    try:
        expected = _run(reference, jobs, None)
        grouped_kinds: set[str] = set()
        counted = _counting(grouped.apply_group, sizes, grouped_kinds)
        group = GroupCommit(counted, max_jobs, max_bytes)
        got = _run(grouped, jobs, group)
        assert got == expected, f"seed {seed}"
        assert _contents(grouped) == _contents(reference), f"seed {seed}"
    finally:
        reference.close()
        grouped.close()
    assert max(sizes) > 1, f"seed {seed}: no group formed"
    if any(isinstance(job, str) for _, job in jobs):  # an expired key's removal joins groups
        assert "KVExpire" in grouped_kinds, f"seed {seed}"
    assert max(sizes) <= max_jobs
    assert any(o and o.startswith("KVQuotaExceeded") for o in expected), f"seed {seed}"
    assert any(o and o.startswith("NotFound") for o in expected), f"seed {seed}"
    assert expected.count(None) > len(expected) // 3, f"seed {seed}"


def test_a_group_holds_one_large_value_alone(tmp_path: Path) -> None:
    """A value past the group's byte bound commits with nothing behind it, and small writes
    queued after it are grouped among themselves."""
    store = _store(tmp_path / "kv.sqlite3")
    sizes: list[int] = []
    big = KVPut("ns-dev", (KVWrite("big", b"x" * 2_000_000),))
    smalls = [KVPut("ns-dev", (KVWrite(f"s{i}", b"v"),)) for i in range(6)]
    jobs: list[tuple[str, KVWriteOp | str]] = [
        ("a", smalls[0]),
        ("b", big),
        ("a", smalls[1]),
        ("c", smalls[2]),
        *[("c", op) for op in smalls[3:]],
    ]
    try:
        outcomes = _run(store, jobs, GroupCommit(_counting(store.apply_group, sizes), 64, 1 << 20))
        assert outcomes == [None] * len(jobs)
        assert store.get("ns-dev", "big") is not None
    finally:
        store.close()
    # In turn: a's first, alone (b's 2 MB value next would pass the bound); then the big one,
    # alone (a group of one commits on its own); then the five small ones, together.
    assert sizes == [5]


WRITER = """
import asyncio, sys
from ember.bindings.kv.async_store import AsyncKVStore
from ember.bindings.kv.store import KVStore

async def writer(kv, task):
    for n in range(100_000):
        key = f"t{task}-{n}"
        # Task 0's values are large: the checkpointer folds the log in meanwhile.
        await kv.put(f"acct-{task % 3}", "ns", key, key.encode() * (20_000 if task == 0 else 50))
        print(key, flush=True)  # acknowledged: its group committed

async def main():
    store = KVStore(sys.argv[1])
    store.ensure_namespace("ns", "ns", None)
    kv = AsyncKVStore(store)
    await asyncio.gather(*(writer(kv, task) for task in range(8)))

asyncio.run(main())
"""


def test_writes_acknowledged_in_groups_survive_kill_9(tmp_path: Path) -> None:
    """Eight writers at once (so their writes commit in groups, and one's large values keep
    the checkpointer busy), killed mid-flight: every write acknowledged before the kill is in
    the file when it is opened again."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    path = tmp_path / "kv.sqlite3"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    acknowledged: list[str] = []
    for line in proc.stdout:
        acknowledged.append(line.strip())
        if len(acknowledged) >= 400:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = KVStore(path)
    try:
        for key in acknowledged:
            entry = store.get("ns", key)
            repeat = 20_000 if key.startswith("t0-") else 50
            assert entry is not None and entry.value == key.encode() * repeat, key
    finally:
        store.close()


def test_a_write_the_disk_has_no_room_for_fails_alone(tmp_path: Path) -> None:
    """A full disk fails the whole group's transaction (SQLite may roll all of it back); the
    writes are then committed one by one, so only the one that does not fit is refused."""
    store = _store(tmp_path / "kv.sqlite3")
    store.limit_pages(store.free_pages() + _pages(store) + 40)  # room for small writes only
    sizes: list[int] = []
    smalls = [KVPut("ns-dev", (KVWrite(f"s{i}", b"v" * 100),)) for i in range(4)]
    big = KVPut("ns-dev", (KVWrite("big", b"x" * 600_000),))
    jobs: list[tuple[str, KVWriteOp | str]] = [
        ("a", smalls[0]),
        ("b", big),
        ("c", smalls[1]),
        ("a", smalls[2]),
        ("b", smalls[3]),
    ]
    try:
        outcomes = _run(store, jobs, GroupCommit(_counting(store.apply_group, sizes), 64, 1 << 20))
        assert sizes == [5]  # they were grouped
        assert outcomes[1] is not None and outcomes[1].startswith("StorageFull: ")
        assert [outcomes[i] for i in (0, 2, 3, 4)] == [None] * 4
        assert store.get("ns-dev", "big") is None
        assert [store.get("ns-dev", f"s{i}") is not None for i in range(4)] == [True] * 4
    finally:
        store.close()


def _pages(store: KVStore) -> int:
    db = sqlite3.connect(store.path)
    try:
        return int(db.execute("PRAGMA page_count").fetchone()[0])
    finally:
        db.close()
