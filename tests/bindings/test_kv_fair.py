"""One account's write flood must not stall other accounts' KV: on a real SQLite file with the
store's real threads, reads run beside a write in progress (and see only committed data), and
writes are served account by account in turn, not first come first served. Nothing here
measures time: a write is held open with an Event, and the order of commits is recorded."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from ember.bindings.kv.async_store import AsyncKVStore
from ember.bindings.kv.store import KVStore

# Generous: reached only if a read waited for the held write, i.e. the test failed.
STUCK_SECONDS = 60


def _store(tmp_path: Path) -> AsyncKVStore:
    store = KVStore(tmp_path / "kv.sqlite3")
    store.ensure_namespace("ns-a", "a", "acct-a")
    store.ensure_namespace("ns-b", "b", "acct-b")
    return AsyncKVStore(store)


def test_a_read_completes_while_a_write_holds_the_writer(tmp_path: Path) -> None:
    kv = _store(tmp_path)
    kv.store.put("ns-b", "k", b"committed")
    holding, release = threading.Event(), threading.Event()

    def held_write() -> None:  # the writer thread, inside a real BEGIN IMMEDIATE transaction
        with kv.store.write_transaction():
            holding.set()
            release.wait()

    async def scenario() -> tuple[bytes | None, bool]:
        write = asyncio.ensure_future(kv.write("acct-a", held_write))
        await asyncio.to_thread(holding.wait)
        try:
            entry = await asyncio.wait_for(kv.get("acct-b", "ns-b", "k"), STUCK_SECONDS)
            done_meanwhile = not write.done()
        finally:
            release.set()
        await write
        return (entry.value if entry else None), done_meanwhile

    try:
        value, done_meanwhile = asyncio.run(scenario())
    finally:
        kv.close()
    assert value == b"committed"
    assert done_meanwhile  # the read finished while the write was still held


def test_a_read_completes_while_another_connection_holds_the_write_lock(tmp_path: Path) -> None:
    """Another writer of the same file (SQLite's own lock, not ours) in mid-transaction."""
    kv = _store(tmp_path)
    kv.store.put("ns-b", "k", b"v1")
    other = sqlite3.connect(tmp_path / "kv.sqlite3", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("UPDATE kv SET value = ? WHERE namespace = 'ns-b'", (b"v2",))

    async def read() -> bytes | None:
        entry = await asyncio.wait_for(kv.get("acct-b", "ns-b", "k"), STUCK_SECONDS)
        return entry.value if entry else None

    try:
        seen = asyncio.run(read())
    finally:
        other.execute("ROLLBACK")
        other.close()
        kv.close()
    assert seen == b"v1"


def test_a_get_right_after_an_acknowledged_put_sees_it(tmp_path: Path) -> None:
    kv = _store(tmp_path)

    async def scenario() -> list[bytes | None]:
        seen = []
        for i in range(50):
            await kv.put("acct-a", "ns-a", f"k{i % 5}", f"v{i}".encode())
            entry = await kv.get("acct-a", "ns-a", f"k{i % 5}")
            seen.append(entry.value if entry else None)
        return seen

    try:
        seen = asyncio.run(scenario())
    finally:
        kv.close()
    assert seen == [f"v{i}".encode() for i in range(50)]


def test_a_victims_write_waits_for_one_write_of_the_flooder_not_its_backlog(
    tmp_path: Path,
) -> None:
    kv = _store(tmp_path)
    order: list[str] = []
    started, release = threading.Event(), threading.Event()

    def write(namespace: str, label: str, hold: bool = False) -> None:
        if hold:
            started.set()
            release.wait()
        kv.store.put(namespace, label, b"x")
        order.append(label)  # on the writer thread, right after the commit

    async def scenario() -> None:
        first = asyncio.ensure_future(kv.write("acct-a", write, "ns-a", "a0", True))
        await asyncio.to_thread(started.wait)  # the writer is inside a0
        flood = [kv.write("acct-a", write, "ns-a", f"a{i}") for i in range(1, 100)]
        victim = kv.write("acct-b", write, "ns-b", "b0")
        pending = [asyncio.ensure_future(c) for c in [*flood, victim]]
        await asyncio.sleep(0)  # every write is queued before the writer goes on
        release.set()
        await asyncio.gather(first, *pending)

    try:
        asyncio.run(scenario())
    finally:
        kv.close()
    assert len(order) == 101
    # a0 was in progress, a1 was first in line: b0 is served next, before 98 of A's writes.
    assert order.index("b0") <= 2, order[:5]
    assert [label for label in order if label != "b0"] == [f"a{i}" for i in range(100)]


def test_each_accounts_writes_keep_their_order_and_all_commit(tmp_path: Path) -> None:
    kv = _store(tmp_path)

    async def scenario() -> None:
        writes = []
        for i in range(60):
            owner, namespace = ("acct-a", "ns-a") if i % 3 else ("acct-b", "ns-b")
            writes.append(kv.put(owner, namespace, "k", f"{i}".encode()))
        await asyncio.gather(*writes)

    try:
        asyncio.run(scenario())
        a = kv.store.get("ns-a", "k")
        b = kv.store.get("ns-b", "k")
    finally:
        kv.close()
    assert a is not None and a.value == b"59"  # the last of A's writes, in A's order
    assert b is not None and b.value == b"57"


def test_a_failing_write_fails_only_its_caller(tmp_path: Path) -> None:
    kv = _store(tmp_path)

    def boom() -> None:
        raise ValueError("bad write")

    async def scenario() -> tuple[str, bytes | None]:
        failed = asyncio.ensure_future(kv.write("acct-a", boom))
        fine = asyncio.ensure_future(kv.put("acct-b", "ns-b", "k", b"ok"))
        try:
            await failed
        except ValueError as exc:
            message = str(exc)
        await fine
        entry = await kv.get("acct-b", "ns-b", "k")
        return message, entry.value if entry else None

    try:
        message, value = asyncio.run(scenario())
    finally:
        kv.close()
    assert (message, value) == ("bad write", b"ok")


def test_close_finishes_queued_writes(tmp_path: Path) -> None:
    kv = _store(tmp_path)

    async def scenario() -> None:
        pending = [
            asyncio.ensure_future(kv.put("acct-a", "ns-a", f"k{i}", b"v")) for i in range(20)
        ]
        await asyncio.sleep(0)
        await kv.aclose()
        await asyncio.gather(*pending)

    asyncio.run(scenario())
    reopened = KVStore(tmp_path / "kv.sqlite3")
    try:
        assert len(reopened.list("ns-a").keys) == 20
    finally:
        reopened.close()
