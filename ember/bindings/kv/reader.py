"""The KV store's reads of keys (``lookup``, ``list``), on a connection of their own.

A mixin of ``KVStore`` (as ``namespaces.NamespaceTable`` is): ``KVStore`` opens a second,
read-only connection to its file with its own lock. In WAL mode a reader sees the last commit
while a write transaction is open on the writer's connection, so reads never wait for writes:
not for the one in progress, and not for any queued behind it (``async_store.py`` runs them on
a thread of their own). Every statement is read to its end, so no read snapshot stays open
between calls (one would hold the write-ahead log from being checkpointed).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

from ember.bindings.kv.keys import (
    decode_cursor,
    encode_cursor,
    key_bytes,
    key_text,
    prefix_upper_bound,
)
from ember.bindings.kv.records import KVEntry, KVKeyInfo, KVListPage, KVLookup


class KeyReader:
    """Reads of a ``KVStore``'s keys through its read connection."""

    # Set by KVStore.__init__; read here.
    clock: Callable[[], float]
    _reader: sqlite3.Connection
    _read_lock: threading.Lock

    def lookup(self, namespace_id: str, key: str) -> KVLookup:
        """The live entry for ``key`` from the read connection (never waits for a write), and
        whether an expired one is there to remove."""
        raw_key = key_bytes(key)
        now = self.clock()
        with self._read_lock:
            rows = self._reader.execute(
                "SELECT value, expiration, metadata FROM kv WHERE namespace = ? AND key = ?",
                (namespace_id, raw_key),
            ).fetchall()  # all: the statement ends here, holding no read snapshot open
        if not rows:
            return KVLookup(None)
        value, expiration, metadata = rows[0]
        if expiration is not None and expiration <= now:
            return KVLookup(None, expired=True)
        return KVLookup(
            KVEntry(key=key, value=bytes(value), expiration=expiration, metadata=metadata)
        )

    def list(
        self, namespace_id: str, *, prefix: str = "", limit: int = 1000, cursor: str | None = None
    ) -> KVListPage:
        """Up to ``limit`` live keys starting with ``prefix``, after ``cursor``, in byte order.
        ``cursor`` is one a list returned (ValueError otherwise: ``limits.validate_cursor``)."""
        raw_prefix = key_bytes(prefix)
        start = raw_prefix
        strictly_after = False
        if cursor:
            after = decode_cursor(cursor)
            if after >= start:
                start, strictly_after = after, True
        clauses = ["namespace = ?", "key > ?" if strictly_after else "key >= ?"]
        params: list[object] = [namespace_id, start]
        upper = prefix_upper_bound(raw_prefix)
        if upper is not None:
            clauses.append("key < ?")
            params.append(upper)
        clauses.append("(expiration IS NULL OR expiration > ?)")
        params.extend([self.clock(), limit + 1])
        query = (
            "SELECT key, expiration, metadata FROM kv WHERE "
            + " AND ".join(clauses)
            + " ORDER BY key LIMIT ?"
        )
        with self._read_lock:
            rows = self._reader.execute(query, params).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        keys = tuple(KVKeyInfo(name=key_text(r[0]), expiration=r[1], metadata=r[2]) for r in rows)
        next_cursor = encode_cursor(bytes(rows[-1][0])) if more and rows else None
        return KVListPage(keys=keys, cursor=next_cursor)
