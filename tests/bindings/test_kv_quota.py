"""Per-account byte counts of the KV store: the running counters against a full recount, the
quota refusing a write atomically and bounding the disk it costs, and old databases upgraded
in place (the per-entry overhead added to their counters)."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from ember.bindings.kv.records import KVWrite
from ember.bindings.kv.schema import ACCOUNTING_VERSION, ENTRY_OVERHEAD_BYTES
from ember.bindings.kv.store import KVQuota, KVQuotaExceeded, KVStore
from ember.errors import StateTooNew

OH = ENTRY_OVERHEAD_BYTES  # what each entry costs beyond its key, value and metadata


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def recount(path: Path, account: str) -> int:
    """The slow reference: sum every stored entry of the account's namespaces, plus the fixed
    overhead of each."""
    with sqlite3.connect(path) as db:
        row = db.execute(
            "SELECT COALESCE(SUM(length(kv.key) + length(kv.value) + "
            "COALESCE(length(CAST(kv.metadata AS BLOB)), 0)), 0), COUNT(*) FROM kv "
            "JOIN namespaces ON namespaces.id = kv.namespace WHERE namespaces.account = ?",
            (account,),
        ).fetchone()
    return int(row[0]) + OH * int(row[1])


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
    quota = KVQuota("tmp", 100 + 3 * OH)
    store.put("n1", "a", b"x" * 40, quota=quota)  # 41 bytes + OH
    store.put("n2", "b", b"y" * 50, quota=quota)  # 51 bytes + OH: 92 + 2 OH in all
    with pytest.raises(KVQuotaExceeded) as refused:
        store.put("n2", "c", b"z" * 10, quota=quota)  # 11 + OH more: 103 + 3 OH > 100 + 3 OH
    assert f"{100 + 3 * OH:,} bytes" in str(refused.value)
    assert f"{103 + 3 * OH:,}" in str(refused.value)
    assert store.get("n2", "c") is None and store.account_bytes("tmp") == 92 + 2 * OH
    store.put("n1", "a", b"x" * 10, quota=quota)  # shrinking an entry is always allowed
    store.put("n2", "c", b"z" * 10, quota=quota)  # now it fits: 11 + 51 + 11 + 3 OH
    assert store.account_bytes("tmp") == 73 + 3 * OH == recount(path, "tmp")
    store.put("n2", "free", b"q" * 500)  # no quota given: not limited (permanent accounts)
    assert store.account_bytes("tmp") == 73 + 3 * OH + 504 + OH


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
    assert store.account_bytes("acct") == 1 + 4 + 2 + OH == recount(path, "acct")
    assert store.get("old", "k").value == b"vvvv"  # type: ignore[union-attr]


def test_counters_of_the_old_accounting_are_recounted_once(tmp_path: Path) -> None:
    """A file whose counters charged keys, values and metadata only (``user_version`` 0) gets
    the per-entry overhead added when opened, once; its writes are then counted the new way."""
    path = tmp_path / "kv.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE namespaces (id TEXT PRIMARY KEY, title TEXT NOT NULL, created REAL "
            "NOT NULL, account TEXT, bytes INTEGER NOT NULL DEFAULT 0);"
            "CREATE TABLE kv (namespace TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
            " expiration INTEGER, metadata TEXT, PRIMARY KEY (namespace, key)) WITHOUT ROWID;"
            "INSERT INTO namespaces VALUES ('n', 'n', 0, 'acct', 10);"  # the old count: 2 + 8
            "INSERT INTO kv VALUES ('n', X'6B31', X'7676767676767676', NULL, NULL);"
            "INSERT INTO namespaces VALUES ('e', 'e', 0, 'acct', 0);"
        )
    store = KVStore(path)
    assert store.account_bytes("acct") == 10 + OH == recount(path, "acct")
    store.put("e", "k2", b"")
    store.close()
    store = KVStore(path)  # reopened: counted already, not again
    assert store.account_bytes("acct") == 10 + OH + 2 + OH == recount(path, "acct")
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == ACCOUNTING_VERSION
        db.execute(f"PRAGMA user_version={ACCOUNTING_VERSION + 1}")
    store.close()
    with pytest.raises(StateTooNew, match="written by a newer ember"):
        KVStore(path)  # a newer ember's file is not miscounted by this one


def test_the_quota_bounds_the_disk_that_tiny_entries_take(tmp_path: Path) -> None:
    """Empty values under short keys: each row's namespace id, header and page slack cost
    more than its key. Filled to the quota, the file stays within it (plus the fixed pages of
    an empty store); counted by key and value bytes alone it grew to ~9x the quota."""
    path = tmp_path / "kv.sqlite3"
    store = KVStore(path)
    namespace = "0f2ac74b498b48028cb68387c421e279"  # a platform id: 32 bytes in every row
    store.ensure_namespace(namespace, "t", "tmp")
    quota = KVQuota("tmp", 256 * 1024)
    index = 0
    with pytest.raises(KVQuotaExceeded):
        while index < 1_000_000:
            store.put(namespace, f"k{index}", b"", quota=quota)
            index += 1
    assert store.account_bytes("tmp") <= quota.max_bytes
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
    empty_store_pages = 4
    assert path.stat().st_size <= quota.max_bytes + empty_store_pages * page_size


def test_a_write_and_its_count_commit_together(tmp_path: Path) -> None:
    """The row and its namespace's counter are one transaction: when the counter's update
    fails, the row is not stored either (and the counters still match a recount)."""
    path = tmp_path / "kv.sqlite3"
    store = KVStore(path)
    store.ensure_namespace("n", "n", "acct")
    store.put("n", "a", b"1")
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TRIGGER refuse_count BEFORE UPDATE OF bytes ON namespaces "
            "BEGIN SELECT RAISE(ABORT, 'counter update refused'); END"
        )
    with pytest.raises(sqlite3.IntegrityError, match="counter update refused"):
        store.put("n", "b", b"22")
    with pytest.raises(sqlite3.IntegrityError):
        store.delete("n", "a")
    assert store.get("n", "b") is None and store.get("n", "a") is not None
    assert store.account_bytes("acct") == recount(path, "acct") == 1 + 1 + OH


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


def test_put_many_is_one_transaction_refused_whole_past_the_quota(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite3"
    store = KVStore(path, clock=Clock())
    store.ensure_namespace("a1", "a1", "alice")
    quota = KVQuota("alice", 10 * (OH + 2 + 100))
    store.put_many("a1", [KVWrite(f"k{i}", b"x" * 100) for i in range(5)], quota=quota)
    before = (store.account_bytes("alice"), recount(path, "alice"))
    assert before[0] == before[1]
    # Rewrites of stored keys (no growth) then new keys: the last one passes the quota.
    batch = [KVWrite(f"k{i}", b"y" * 100) for i in range(5)]
    batch += [KVWrite(f"n{i}", b"z" * 100) for i in range(6)]
    with pytest.raises(KVQuotaExceeded, match="these 11 writes"):
        store.put_many("a1", batch, quota=quota)
    assert (store.account_bytes("alice"), recount(path, "alice")) == before
    assert store.get("a1", "k0").value == b"x" * 100  # type: ignore[union-attr]
    assert store.get("a1", "n0") is None
    store.put_many("a1", batch[:-1], quota=quota)  # one fewer fits exactly
    assert store.account_bytes("alice") == recount(path, "alice") == quota.max_bytes
    store.delete_many("a1", ["k0", "n0", "absent"])
    assert (
        store.account_bytes("alice") == recount(path, "alice") == quota.max_bytes - 2 * (OH + 102)
    )
    store.close()


def test_expired_keys_never_count_against_the_quota(tmp_path: Path) -> None:
    """An expired key is gone for the worker (get and list skip it), so it must not keep its
    bytes charged: a write the account's live data leaves room for is accepted, whoever last
    read the expired keys (none here: a worker writing unique keys with a TTL)."""
    clock = Clock()
    path = tmp_path / "kv.sqlite3"
    store = KVStore(path, clock=clock)
    store.ensure_namespace("a1", "a1", "alice")
    store.ensure_namespace("a2", "a2", "alice")
    store.ensure_namespace("b1", "b1", "bob")
    quota = KVQuota("alice", 20 * (OH + 4 + 100))
    for i in range(15):  # 15 of the 20 entries the quota holds, expiring in a minute
        ns = "a1" if i % 2 else "a2"
        store.put(ns, f"e{i:03}", b"x" * 100, expiration=int(clock.now) + 60, quota=quota)
    store.put("a1", "live", b"y" * 100, quota=quota)
    store.put("b1", "bobs", b"z" * 100, expiration=int(clock.now) + 60)  # another account's
    clock.now += 61
    for i in range(15):  # as many again: room only once the expired ones are not charged
        store.put("a2", f"n{i:03}", b"x" * 100, quota=quota)
    assert recount(path, "alice") == 16 * (OH + 4 + 100)  # the expired rows are gone
    assert store.get("a1", "live").value == b"y" * 100
    assert store.get("a2", "n014").value == b"x" * 100
    with sqlite3.connect(path) as db:  # bob's expired key is bob's business, untouched here
        assert db.execute("SELECT COUNT(*) FROM kv WHERE namespace = 'b1'").fetchone()[0] == 1
    with pytest.raises(KVQuotaExceeded):  # live data still counts: 16 + 5 > 20
        store.put_many("a1", [KVWrite(f"m{i:03}", b"x" * 100, None, None) for i in range(5)],
                       quota=quota)  # fmt: skip
