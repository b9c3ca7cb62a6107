"""The KV store's SQLite schema and its byte accounting (what an entry costs against a quota).

``KVStore`` (``store.py``) creates the tables, adds ``ADDED_COLUMNS`` to older files and, when a
file's ``PRAGMA user_version`` is below ``ACCOUNTING_VERSION``, recounts its namespaces' bytes
with ``ENTRY_BYTES_SQL``; ``entry_bytes`` is the same charge computed in Python for a write.
"""

from __future__ import annotations

SCHEMA = """
CREATE TABLE IF NOT EXISTS namespaces (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    created REAL NOT NULL,
    account TEXT,
    bytes INTEGER NOT NULL DEFAULT 0,
    -- 1 while the owning account is a platform's temporary one: what all of them store together
    -- is capped (KVPool); the control plane sets it, and clears it when the account is claimed.
    temporary INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS kv (
    namespace TEXT NOT NULL,
    key BLOB NOT NULL,
    value BLOB NOT NULL,
    expiration INTEGER,
    metadata TEXT,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
-- The entries that expire, by namespace: finding an account's expired entries (at its quota,
-- store.py) reads only those, not every row it has. An index row holds the namespace, the
-- expiration and the key: ~40 bytes plus the key for an entry with an expiration, which
-- ENTRY_OVERHEAD_BYTES does not charge (at most ~1.6x the disk a quota allows, for tiny keys).
CREATE INDEX IF NOT EXISTS kv_expiring ON kv (namespace, expiration)
    WHERE expiration IS NOT NULL;
"""
# Columns added after the first release: (name, definition), applied when missing.
ADDED_COLUMNS = (
    ("account", "TEXT"),
    ("bytes", "INTEGER NOT NULL DEFAULT 0"),
    ("temporary", "INTEGER NOT NULL DEFAULT 0"),
)

# What one entry costs on disk beyond its key, value and metadata bytes, charged to the quota.
# Each row of ``kv`` repeats its namespace id (32 bytes on the platform) and carries a record
# header, a cell pointer and varints, and b-tree pages are never quite full. Measured on this
# schema (SQLite 3.40, 4 KiB pages): 50,000 to 200,000 entries ``k<i>`` with empty values put
# one by one into one namespace, file size after ``wal_checkpoint(TRUNCATE)``: 52.2 bytes per
# entry at ~6-byte keys (so ~46 bytes of overhead), 96.0 at ~46-byte keys (pages ~88% full).
# 64 covers the fixed part and the page slack on keys up to ~130 bytes; without it a 10 MiB
# quota let 1.7 million empty 6-byte keys take ~90 MB of disk.
ENTRY_OVERHEAD_BYTES = 64
ENTRY_BYTES_SQL = (
    f"{ENTRY_OVERHEAD_BYTES} + length(key) + length(value) "
    "+ COALESCE(length(CAST(metadata AS BLOB)), 0)"
)
# ``PRAGMA user_version`` of the file: the byte accounting its counters follow. 0: keys, values
# and metadata only (every file before the per-entry overhead); 1: with ENTRY_OVERHEAD_BYTES.
# Opening an older file recounts every namespace once, in one transaction.
ACCOUNTING_VERSION = 1


def entry_bytes(raw_key: bytes, value: bytes, metadata: str | None) -> int:
    """What an entry is charged against a quota (the Python twin of ``ENTRY_BYTES_SQL``)."""
    metadata_bytes = len(metadata.encode()) if metadata else 0
    return ENTRY_OVERHEAD_BYTES + len(raw_key) + len(value) + metadata_bytes
