"""The KV store: namespaces of keys in one SQLite file, shared by every tenant of a supervisor.

Owns durability and ordering, not validation (``limits.py`` does that, for every caller).

- Namespaces are addressed by id; ``ember dev`` uses a binding's configured id, the platform
  (``ember serve``, the KV REST API) creates ids per account. One file holds them all, so a
  restart loses nothing acknowledged: WAL mode with ``synchronous=FULL``, and every write returns
  only after its commit. Writes are ``KVPut`` / ``KVDelete`` ops: ``apply`` commits one,
  ``apply_group`` several in one transaction and one flush (``write_group.py``).
- Keys are stored as UTF-8 bytes, so ``list`` orders them by bytes, as Workers KV does.
- Expiry is logical: a key whose ``expiration`` (seconds since the epoch) is not after the
  injectable ``clock`` is invisible, and deleted lazily.
- Each namespace may belong to an account and keeps a running count of its stored bytes (keys,
  values and metadata, plus ``ENTRY_OVERHEAD_BYTES`` per entry for the row around them),
  updated in the same transaction as every write and delete, so a ``KVQuota`` on a put (the
  platform's per-account limit) is exact and bounds the disk it costs.
- The write-ahead log is folded into the file by a checkpointer thread with its own connection
  (``checkpointer.py``), not at the end of the writer's commits.
- Deleted data is overwritten (``secure_delete``), and ``compact`` empties the write-ahead log,
  so a deleted account leaves nothing readable behind.
- A write the disk has no room for (SQLITE_FULL) is rolled back and raised as ``StorageFull``,
  recorded in ``health`` (``ember/storage.py``) until a later write succeeds.

- Reads of keys (``get``, ``lookup``, ``list``) use a second, read-only connection with its own
  lock: WAL lets them run while a write transaction is open on the other (they see the last
  commit), so a read never waits for a write.

``KVStore`` is synchronous and thread-safe; ``AsyncKVStore`` (``async_store.py``) runs its reads
on a reader thread and its writes on a writer thread that shares its time among accounts by
bytes, so the supervisor's event loop never waits on a disk flush and no tenant's writes queue
up everybody's.
The schema and the byte accounting are in ``schema.py``, how keys and cursors are encoded in
``keys.py``, the namespaces (create, list, rename, delete, an account's bytes) in
``namespaces.py``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from ember import sqlite_space
from ember.bindings.kv.checkpointer import WRITER_PAGES, Checkpointer
from ember.bindings.kv.keys import key_bytes
from ember.bindings.kv.namespaces import NamespaceTable
from ember.bindings.kv.pool import check_pool
from ember.bindings.kv.reader import KeyReader
from ember.bindings.kv.records import (
    KVDelete,
    KVEntry,
    KVExpire,
    KVPoolSource,
    KVPut,
    KVQuota,
    KVQuotaExceeded,
    KVWrite,
    KVWriteOp,
)
from ember.bindings.kv.schema import (
    ACCOUNTING_VERSION,
    ADDED_COLUMNS,
    ENTRY_BYTES_SQL,
    SCHEMA,
    entry_bytes,
)
from ember.bindings.kv.write_group import WriteGroups
from ember.errors import InternalError, NotFound, StateTooNew
from ember.storage import StorageFull, StorageHealth, write_transaction

STORE = "KV store"  # how the operator's log and /health name it


class KVStoreUnavailable(InternalError):
    """The store's file cannot be opened as ember's KV database (names the file and why)."""

    def __init__(self, path: Path, cause: BaseException) -> None:
        self.path = path
        super().__init__(
            f"the KV store {path} cannot be opened ({cause}); expected an SQLite database "
            "that ember can read and write (move the file away to start with an empty store)"
        )


class KVStore(NamespaceTable, KeyReader, WriteGroups):
    """SQLite-backed KV namespaces (synchronous; one connection behind a lock)."""

    def __init__(
        self,
        path: Path | str,
        clock: Callable[[], float] = time.time,
        health: StorageHealth | None = None,
    ) -> None:
        self.path = Path(path)
        self.clock = clock
        self.health = health or StorageHealth()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
            os.close(fd)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise KVStoreUnavailable(self.path, exc) from exc
        try:
            sqlite_space.enable_incremental(self._db)  # a new file only: before WAL, tables
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA secure_delete=ON")
            # Checkpoints run on a thread of their own (checkpointer.py); this is the net.
            self._db.execute(f"PRAGMA wal_autocheckpoint={WRITER_PAGES}")
            self._db.executescript(SCHEMA)
            self._migrate()
        except sqlite3.Error as exc:  # e.g. "file is not a database": a foreign or torn file
            self._db.close()
            raise KVStoreUnavailable(self.path, exc) from exc
        self.checkpoints = Checkpointer(self.path)
        # Opened after the schema and WAL are in place; query_only: it must never write, or
        # it would wait for (and take) the writer's lock.
        self._read_lock = threading.Lock()
        try:
            self._reader = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._reader.execute("PRAGMA query_only=ON")
        except sqlite3.Error as exc:
            self._db.close()
            raise KVStoreUnavailable(self.path, exc) from exc

    def _migrate(self) -> None:
        """Add the columns an old file lacks, and recount its namespaces' bytes when they were
        counted under an older accounting (``ACCOUNTING_VERSION``)."""
        with self._lock, self._transaction():
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            if version > ACCOUNTING_VERSION:
                raise StateTooNew(self.path, "KV accounting version", version, ACCOUNTING_VERSION)
            present = {row[1] for row in self._db.execute("PRAGMA table_info(namespaces)")}
            missing = [(name, kind) for name, kind in ADDED_COLUMNS if name not in present]
            for name, kind in missing:
                self._db.execute(f"ALTER TABLE namespaces ADD COLUMN {name} {kind}")
            if missing or version < ACCOUNTING_VERSION:
                self._db.execute(
                    f"UPDATE namespaces SET bytes = (SELECT COALESCE(SUM({ENTRY_BYTES_SQL}), 0) "
                    "FROM kv WHERE kv.namespace = namespaces.id)"
                )
                self._db.execute(f"PRAGMA user_version={ACCOUNTING_VERSION}")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction; the caller holds ``_lock``. Needed explicitly: with
        ``isolation_level=None`` sqlite3 opens none, and ``with self._db`` would leave each
        statement (the row, then its namespace's counter) to commit on its own."""
        with write_transaction(self._db, self.health, STORE, self.path):
            yield

    @contextmanager
    def write_transaction(self) -> Iterator[None]:
        """Hold the writer: its lock and one open write transaction (committed on exit)."""
        with self._lock, self._transaction():
            yield

    def limit_pages(self, pages: int) -> int:
        """Cap the file at ``pages`` pages, or at its size now if that is larger; returns the
        cap. A write past it fails as on a full disk (``ember serve --storage-max-pages``)."""
        with self._lock:
            return int(self._db.execute(f"PRAGMA max_page_count = {int(pages)}").fetchone()[0])

    def compact(self) -> None:
        """Rewrite the file without free space or stale b-tree dividers (``VACUUM``), then fold
        the write-ahead log in and truncate it.

        Costs a full rewrite of the file under the store's lock: only where nobody waits on it
        (``ember serve --compact``, before it serves). Deleting runs ``release_free_pages``.
        """
        # The checkpointer's lock first (as a checkpoint holds it): a PASSIVE checkpoint in
        # progress would make the log's TRUNCATE answer busy and leave deleted data in it.
        with self.checkpoints.lock, self._lock:
            sqlite_space.vacuum(self._db, self.health, STORE, self.path)

    def free_pages(self) -> int:
        """Free pages ``release_free_pages`` would hand back."""
        return sqlite_space.free_pages(self._db, self._lock)

    def release_free_pages(self, step: int = sqlite_space.STEP_PAGES) -> sqlite_space.Released:
        """Give deleted pages back to the file system a few at a time, then truncate the
        write-ahead log, so deleted keys and values leave no trace (``sqlite_space.py``)."""
        with self.checkpoints.lock:  # see ``compact``
            return sqlite_space.release_free_pages(self._db, self._lock, step)

    def switch_to_incremental_vacuum(self, before: Callable[[], None] | None = None) -> bool:
        """An older file gets incremental auto-vacuum with one ``VACUUM``; True if it did."""
        return sqlite_space.switch_to_incremental(
            self._db, self._lock, self.health, STORE, self.path, before=before
        )

    def close(self) -> None:
        """Close the database."""
        self.checkpoints.close()
        with self._read_lock:
            self._reader.close()
        with self._lock:
            self._db.close()

    # -- keys -------------------------------------------------------------------------------

    def get(self, namespace_id: str, key: str) -> KVEntry | None:
        """The live entry for ``key``, or None (missing or expired: then removed)."""
        found = self.lookup(namespace_id, key)
        if found.expired:
            self.remove_expired(namespace_id, key)
        return found.entry

    def remove_expired(self, namespace_id: str, key: str) -> None:
        """Delete ``key`` if it has expired (a write since may have renewed it). Housekeeping:
        on a full disk it stays, invisible, and goes with a later write or purge."""
        with contextlib.suppress(StorageFull):
            self.apply(KVExpire(namespace_id, key))

    def put(
        self,
        namespace_id: str,
        key: str,
        value: bytes,
        *,
        expiration: int | None = None,
        metadata: str | None = None,
        quota: KVQuota | None = None,
        registered_only: bool = False,
    ) -> None:
        """Write ``key``; returns after the transaction is committed (durable).

        With ``quota``, refuses (``KVQuotaExceeded``, nothing written) a write that would take
        the account's stored bytes past ``quota.max_bytes``; checked inside the transaction.
        With ``registered_only``, a namespace that is not registered (``ensure_namespace``) is
        ``NotFound``, checked in the same transaction.
        """
        write = KVWrite(key, value, expiration, metadata)
        self.put_many(namespace_id, [write], quota=quota, registered_only=registered_only)

    def put_many(
        self,
        namespace_id: str,
        writes: Sequence[KVWrite],
        *,
        quota: KVQuota | None = None,
        registered_only: bool = False,
        pool: KVPoolSource | None = None,
    ) -> None:
        """Write every entry of ``writes`` in order (a key written twice keeps the last), in one
        transaction: one flush for a bulk request, and all or nothing.

        ``quota`` and ``registered_only`` as for ``put``; the quota is checked against the
        request's net effect, so a refused request (``KVQuotaExceeded``) writes nothing.
        ``pool``: the temporary accounts' cap, read inside the transaction.
        """
        self.apply(KVPut(namespace_id, tuple(writes), quota, pool, registered_only))

    def _apply_locked(self, op: KVWriteOp) -> None:
        """Apply ``op`` inside the caller's transaction (it holds ``_lock``): raising leaves
        the caller to roll back whatever it wrote."""
        if isinstance(op, KVDelete):
            for key in op.keys:
                self._remove(op.namespace_id, key_bytes(key))
            return
        if isinstance(op, KVExpire):
            raw_key = key_bytes(op.key)
            row = self._db.execute(
                "SELECT expiration FROM kv WHERE namespace = ? AND key = ?",
                (op.namespace_id, raw_key),
            ).fetchone()
            if row is not None and row[0] is not None and row[0] <= self.clock():
                self._remove(op.namespace_id, raw_key)
            return
        quota = op.quota
        if quota is not None and op.pool is not None:  # its figures as they stand now
            quota = replace(quota, pool=op.pool.kv_pool())
        self._put_locked(op.namespace_id, op.writes, quota, op.registered_only)

    def _put_locked(
        self,
        namespace_id: str,
        writes: Sequence[KVWrite],
        quota: KVQuota | None,
        registered_only: bool,
    ) -> None:
        if (
            registered_only
            and not self._db.execute(
                "SELECT 1 FROM namespaces WHERE id = ?", (namespace_id,)
            ).fetchone()
        ):
            # A platform never writes into a namespace that is not registered (deleted,
            # say, while a worker bound to it kept running): nothing would count its bytes
            # against a quota, and nothing would delete them with the account.
            raise NotFound(f"KV namespace {namespace_id!r} does not exist")
        delta = 0
        for write in writes:
            raw_key = key_bytes(write.key)
            old = self._entry_bytes(namespace_id, raw_key)
            self._db.execute(
                "INSERT OR REPLACE INTO kv (namespace, key, value, expiration, metadata) "
                "VALUES (?, ?, ?, ?, ?)",
                (namespace_id, raw_key, write.value, write.expiration, write.metadata),
            )
            delta += entry_bytes(raw_key, write.value, write.metadata) - old
        if quota is not None and delta > 0:
            # Checked after the rows, inside the transaction: raising rolls them back.
            used = self._account_bytes(quota.account)
            if used + delta > quota.max_bytes and self._purge_account_expired(quota.account):
                used = self._account_bytes(quota.account)
            what = "this write" if len(writes) == 1 else f"these {len(writes)} writes"
            if used + delta > quota.max_bytes:
                remedy = f", or {quota.remedy}" if quota.remedy else ""
                raise KVQuotaExceeded(
                    "kv_bytes",
                    used + delta,
                    quota.max_bytes,
                    f"{what} would store {used + delta:,} bytes of KV data for the "
                    f"account; its limit is {quota.max_bytes:,} bytes (delete keys "
                    f"first{remedy})",
                )
            if quota.pool is not None:
                check_pool(quota.pool, self.temporary_bytes_locked(), delta, what)
        self._count(namespace_id, delta)

    def delete(self, namespace_id: str, key: str) -> None:
        """Delete ``key`` (no error if absent)."""
        self.delete_many(namespace_id, [key])

    def delete_many(self, namespace_id: str, keys: Sequence[str]) -> None:
        """Delete every key of ``keys`` (no error for absent ones), in one transaction."""
        self.apply(KVDelete(namespace_id, tuple(keys)))

    def _account_bytes(self, account: str) -> int:
        return int(
            self._db.execute(
                "SELECT COALESCE(SUM(bytes), 0) FROM namespaces WHERE account = ?", (account,)
            ).fetchone()[0]
        )

    def _purge_account_expired(self, account: str) -> int:
        """Delete the account's expired entries (the caller holds ``_lock`` in a transaction);
        returns how many. Run when a write would pass the quota: an expired key is gone for its
        worker (``get`` and ``list`` skip it) but is only removed when read, so a worker writing
        unique keys with a TTL would otherwise be refused for data it can no longer see. The
        ``kv_expiring`` index makes it read only the account's expired entries."""
        return self._delete_expired(
            "namespace IN (SELECT id FROM namespaces WHERE account = ?)", account
        )

    def _delete_expired(self, scope: str = "", *params: object) -> int:
        """Delete the expired entries in ``scope`` (a SQL condition on ``kv``, with ``params``;
        empty: all), their bytes uncounted from their namespaces; the caller holds ``_lock`` in
        a transaction. Returns how many."""
        where = f"{scope} AND " if scope else ""
        where += "expiration IS NOT NULL AND expiration <= ?"
        args = (*params, self.clock())
        freed = self._db.execute(
            f"SELECT namespace, SUM({ENTRY_BYTES_SQL}) FROM kv WHERE {where} GROUP BY namespace",
            args,
        ).fetchall()
        if not freed:
            return 0
        deleted = self._db.execute(f"DELETE FROM kv WHERE {where}", args).rowcount
        for namespace_id, size in freed:
            self._count(namespace_id, -int(size))
        return deleted

    def _entry_bytes(self, namespace_id: str, raw_key: bytes) -> int:
        row = self._db.execute(
            f"SELECT {ENTRY_BYTES_SQL} FROM kv WHERE namespace = ? AND key = ?",
            (namespace_id, raw_key),
        ).fetchone()
        return int(row[0]) if row else 0

    def _remove(self, namespace_id: str, raw_key: bytes) -> None:
        old = self._entry_bytes(namespace_id, raw_key)
        if old:
            self._db.execute(
                "DELETE FROM kv WHERE namespace = ? AND key = ?", (namespace_id, raw_key)
            )
            self._count(namespace_id, -old)

    def _count(self, namespace_id: str, delta: int) -> None:
        if delta:
            self._db.execute(
                "UPDATE namespaces SET bytes = bytes + ? WHERE id = ?", (delta, namespace_id)
            )

    def purge_expired(self) -> int:
        """Delete every expired key; returns how many."""
        with self._lock, self._transaction():
            return self._delete_expired()
