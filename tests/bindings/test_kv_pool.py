"""The temporary accounts' pool in the real KV store: only namespaces marked temporary count, a
write past the pool's cap is refused whole inside its transaction, a claim unmarks an account's
namespaces, and a store from before the mark gains it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ember.bindings.kv.records import KVPool, KVQuota, KVQuotaExceeded, KVWrite
from ember.bindings.kv.schema import ENTRY_OVERHEAD_BYTES
from ember.bindings.kv.store import KVStore

OH = ENTRY_OVERHEAD_BYTES
KEY = "platform.temporary.max_total_stored_bytes"


def test_the_pool_counts_temporary_namespaces_and_outside_bytes(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv.sqlite3")
    store.ensure_namespace("t1", "t1", "alice", temporary=True)
    store.ensure_namespace("t2", "t2", "bob", temporary=True)
    store.ensure_namespace("p1", "p1", "acme", temporary=False)
    store.put("p1", "k", b"x" * 5000)  # a permanent account's: not in the pool
    pool = KVPool(max_bytes=2000, outside_bytes=1000, key=KEY, remedy="claim the account")
    alice = KVQuota("alice", 10_000, pool=pool)
    bob = KVQuota("bob", 10_000, pool=pool)
    store.put("t1", "a", b"x" * (500 - OH - 1), quota=alice)  # 500 bytes: 1,500 in the pool
    assert store.temporary_bytes() == 500
    with pytest.raises(KVQuotaExceeded) as refused:
        store.put_many(
            "t2", [KVWrite("b", b"y" * 200), KVWrite("c", b"y" * 300)], quota=bob
        )  # 500 + 2 x OH + 2 more: past 2,000
    assert refused.value.limit == "temporary_total_bytes"
    message = str(refused.value)
    assert "store 1,500 bytes together" in message and KEY in message
    assert message.endswith("or claim the account")
    assert store.get("t2", "b") is None  # nothing of the request was written
    store.put("t2", "b", b"y" * 200, quota=bob)  # 1,500 + 200 + 1 + OH: fits
    assert store.temporary_bytes() == 500 + 201 + OH

    # A claim takes alice's namespace out of the pool; a later registration keeps the mark.
    store.set_account_temporary("alice", False)
    assert store.temporary_bytes() == 201 + OH
    store.ensure_namespace("t2", "t2", "bob")  # no word on its kind: left as it was
    assert store.temporary_bytes() == 201 + OH
    store.close()


def test_a_store_from_before_the_mark_gains_it(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE namespaces (id TEXT PRIMARY KEY, title TEXT NOT NULL,
                created REAL NOT NULL, account TEXT, bytes INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE kv (namespace TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,
                expiration INTEGER, metadata TEXT, PRIMARY KEY (namespace, key)) WITHOUT ROWID;
            INSERT INTO namespaces VALUES ('n', 'n', 0, 'tmp', 0);
            INSERT INTO kv VALUES ('n', X'6b', X'7878', NULL, NULL);
            PRAGMA user_version = 1;
            """
        )
    store = KVStore(path)
    assert store.temporary_bytes() == 0  # unmarked until the control plane says
    store.ensure_namespace("n", "n", "tmp", temporary=True)  # sync_store at start
    assert store.temporary_bytes() == OH + 1 + 2
    store.close()
