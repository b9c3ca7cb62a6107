"""Per-account byte counts of the KV store: the running counters against a full recount, the
quota refusing a write atomically, and old databases upgraded in place."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from ember.bindings.kv.store import KVQuota, KVQuotaExceeded, KVStore


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def recount(path: Path, account: str) -> int:
    """The slow reference: sum every stored entry of the account's namespaces."""
    with sqlite3.connect(path) as db:
        row = db.execute(
            "SELECT COALESCE(SUM(length(kv.key) + length(kv.value) + "
            "COALESCE(length(CAST(kv.metadata AS BLOB)), 0)), 0) FROM kv "
            "JOIN namespaces ON namespaces.id = kv.namespace WHERE namespaces.account = ?",
            (account,),
        ).fetchone()
    return int(row[0])


def test_running_counts_match_a_recount_over_random_operations(tmp_path: Path) -> None:
    rng = random.Random(11)
    clock = Clock()
    path = tmp_path / "kv.sqlite3"
    store = KVStore(path, clock=clock)
    for ns, account in (("a1", "alice"), ("a2", "alice"), ("b1", "bob")):
        store.ensure_namespace(ns, ns, account)
    keys = [f"k{i}" for i in range(25)] + ["é", "\U0001f600/x"]
    for _ in range(600):
        ns = rng.choice(["a1", "a2", "b1"])
        op = rng.random()
        if op < 0.6:
            metadata = rng.choice([None, '{"m":1}', '{"é":"ü"}'])
            expiration = rng.choice([None, None, int(clock.now) + rng.randint(60, 600)])
            value = rng.randbytes(rng.randint(0, 300))
            store.put(ns, rng.choice(keys), value, expiration=expiration, metadata=metadata)
        elif op < 0.8:
            store.delete(ns, rng.choice(keys))
        elif op < 0.9:
            clock.now += rng.randint(0, 400)
            store.get(ns, rng.choice(keys))  # may delete an expired key lazily
        else:
            store.purge_expired()
        for account in ("alice", "bob"):
            assert store.account_bytes(account) == recount(path, account)


def test_quota_refuses_the_write_and_keeps_everything_else(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite3"
    store = KVStore(path)
    store.ensure_namespace("n1", "one", "tmp")
    store.ensure_namespace("n2", "two", "tmp")
    quota = KVQuota("tmp", 100)
    store.put("n1", "a", b"x" * 40, quota=quota)  # 41 bytes
    store.put("n2", "b", b"y" * 50, quota=quota)  # 51 bytes: 92 in all
    with pytest.raises(KVQuotaExceeded) as refused:
        store.put("n2", "c", b"z" * 10, quota=quota)  # 11 more: 103 > 100
    assert "100 bytes" in str(refused.value) and "103" in str(refused.value)
    assert store.get("n2", "c") is None and store.account_bytes("tmp") == 92
    store.put("n1", "a", b"x" * 10, quota=quota)  # shrinking an entry is always allowed
    store.put("n2", "c", b"z" * 10, quota=quota)  # now it fits: 11 + 51 + 11 = 73
    assert store.account_bytes("tmp") == 73 == recount(path, "tmp")
    store.put("n2", "free", b"q" * 500)  # no quota given: not limited (permanent accounts)
    assert store.account_bytes("tmp") == 73 + 504


def test_an_old_store_gains_owner_and_counts_in_place(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE namespaces (id TEXT PRIMARY KEY, title TEXT NOT NULL, created REAL);"
            "CREATE TABLE kv (namespace TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
            " expiration INTEGER, metadata TEXT, PRIMARY KEY (namespace, key)) WITHOUT ROWID;"
            "INSERT INTO namespaces VALUES ('old', 'old', 0);"
            "INSERT INTO kv VALUES ('old', X'6B', X'76767676', NULL, '{}');"
        )
    store = KVStore(path)
    store.ensure_namespace("old", "old", "acct")  # fills in the owner of an existing namespace
    assert store.account_bytes("acct") == 1 + 4 + 2 == recount(path, "acct")
    assert store.get("old", "k").value == b"vvvv"  # type: ignore[union-attr]


def test_compact_truncates_the_write_ahead_log(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite3"
    store = KVStore(path)
    store.ensure_namespace("n", "n", "acct")
    store.put("n", "secret-key", b"secret-value" * 100)
    store.delete_namespace("n")
    store.compact()
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    assert b"secret-value" not in path.read_bytes()
