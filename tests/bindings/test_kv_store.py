"""The SQLite KV store: semantics against an in-memory reference, expiry by an injected clock."""

from __future__ import annotations

import random
from pathlib import Path

from ember.bindings.kv.store import KVStore


class Clock:
    """A settable clock (seconds since the epoch)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_get_put_delete_and_metadata(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv.sqlite3")
    store.put("ns", "k", b"v1", metadata='{"a":1}')
    entry = store.get("ns", "k")
    assert entry is not None and (entry.value, entry.metadata, entry.expiration) == (
        b"v1",
        '{"a":1}',
        None,
    )
    store.put("ns", "k", b"v2")
    assert store.get("ns", "k").value == b"v2"  # type: ignore[union-attr]
    assert store.get("other", "k") is None  # namespaces are separate
    store.delete("ns", "k")
    store.delete("ns", "k")  # deleting a missing key is fine
    assert store.get("ns", "k") is None


def test_get_returns_none_for_an_expired_key(tmp_path: Path) -> None:
    clock = Clock()
    store = KVStore(tmp_path / "kv.sqlite3", clock=clock)
    store.put("ns", "short", b"x", expiration=int(clock.now) + 60)
    store.put("ns", "long", b"y", expiration=int(clock.now) + 3600)
    clock.now += 59
    assert store.get("ns", "short") is not None
    clock.now += 1
    assert store.get("ns", "short") is None
    assert [k.name for k in store.list("ns").keys] == ["long"]
    clock.now += 3600
    assert store.purge_expired() == 1
    assert store.list("ns").keys == ()


def test_writes_survive_reopening(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv.sqlite3")
    store.create_namespace("title", "ns1")
    store.put("ns1", "k", b"durable")
    store.close()
    reopened = KVStore(tmp_path / "kv.sqlite3")
    assert reopened.get("ns1", "k").value == b"durable"  # type: ignore[union-attr]
    assert [(n.id, n.title) for n in reopened.list_namespaces()] == [("ns1", "title")]
    assert (tmp_path / "kv.sqlite3").stat().st_mode & 0o777 == 0o600


def test_deleting_a_namespace_removes_only_its_keys(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv.sqlite3")
    for ns in ("a", "b"):
        store.create_namespace(ns, ns)
        store.put(ns, "k", ns.encode())
    store.delete_namespace("a")
    assert store.get("a", "k") is None and store.get("b", "k").value == b"b"  # type: ignore[union-attr]
    assert [n.id for n in store.list_namespaces()] == ["b"]


def test_list_pages_match_a_sorted_reference_on_random_keys(tmp_path: Path) -> None:
    rng = random.Random(7)
    store = KVStore(tmp_path / "kv.sqlite3")
    alphabet = ["a", "b", "é", "z", "\U0001f600", "/", "ÿ"]
    keys = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(300)}
    for key in keys:
        store.put("ns", key, key.encode())
    for prefix in ["", "a", "é", "\U0001f600", "zz", "ÿ"]:
        for limit in (1, 7, 1000):
            expected = sorted((k for k in keys if k.startswith(prefix)), key=lambda k: k.encode())
            seen: list[str] = []
            cursor = None
            while True:
                page = store.list("ns", prefix=prefix, limit=limit, cursor=cursor)
                assert len(page.keys) <= limit
                seen += [k.name for k in page.keys]
                cursor = page.cursor
                if cursor is None:
                    break
            assert seen == expected, (prefix, limit)
