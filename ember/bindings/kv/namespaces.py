"""The KV store's namespaces: create, register, look up, list, rename, delete, and the bytes an
account stores in them.

A mixin of ``KVStore`` (as ``dispatch.FrameDispatch`` is of ``IsolateProcess``): the namespaces
share its connection, lock and transactions, and a key's write updates its namespace's byte count
in the same transaction. Separate from ``store.py`` so that the keys' reads and writes, where
durability and ordering live, read on their own.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from ember.bindings.kv.records import Namespace
from ember.bindings.kv.schema import ENTRY_BYTES_SQL
from ember.errors import NotFound

# One transaction of a namespace's deletion: the entries (and their bytes) it deletes at most.
DELETE_BATCH_ROWS = 256
DELETE_BATCH_BYTES = 4 * 1024 * 1024


class NamespaceTable:
    """The ``namespaces`` table of a ``KVStore``."""

    # Set by KVStore.__init__; read here.
    clock: Callable[[], float]
    _db: sqlite3.Connection
    _lock: threading.Lock

    if TYPE_CHECKING:  # defined by KVStore

        def _transaction(self) -> AbstractContextManager[None]: ...

    def create_namespace(self, title: str, namespace_id: str | None = None) -> Namespace:
        """Create a namespace (a fresh random id unless one is given)."""
        ns = Namespace(id=namespace_id or uuid.uuid4().hex, title=title)
        with self._lock, self._transaction():
            self._db.execute(
                "INSERT INTO namespaces (id, title, created) VALUES (?, ?, ?)",
                (ns.id, ns.title, self.clock()),
            )
        return ns

    def ensure_namespace(
        self,
        namespace_id: str,
        title: str,
        account: str | None = None,
        temporary: bool | None = None,
    ) -> Namespace:
        """The namespace ``namespace_id``, created with ``title`` if it does not exist.

        ``account`` records (or fills in) which account owns it, for ``KVQuota``; ``temporary``
        (unless None) whether that account is a temporary one, for ``KVPool``.
        """
        with self._lock, self._transaction():
            if temporary is not None:
                self._db.execute(
                    "UPDATE namespaces SET temporary = ? WHERE id = ?",
                    (int(temporary), namespace_id),
                )
            self._db.execute(
                "INSERT OR IGNORE INTO namespaces (id, title, created, account, temporary) "
                "VALUES (?, ?, ?, ?, ?)",
                (namespace_id, title, self.clock(), account, int(bool(temporary))),
            )
            if account is not None:
                self._db.execute(
                    "UPDATE namespaces SET account = ? WHERE id = ? AND account IS NULL",
                    (account, namespace_id),
                )
            row = self._db.execute(
                "SELECT id, title FROM namespaces WHERE id = ?", (namespace_id,)
            ).fetchone()
        return Namespace(id=row[0], title=row[1])

    def get_namespace(self, namespace_id: str) -> Namespace:
        """The namespace, or NotFound."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, title FROM namespaces WHERE id = ?", (namespace_id,)
            ).fetchone()
        if row is None:
            raise NotFound(f"KV namespace {namespace_id!r} does not exist")
        return Namespace(id=row[0], title=row[1])

    def list_namespaces(self) -> list[Namespace]:
        """Every namespace, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, title FROM namespaces ORDER BY created, id"
            ).fetchall()
        return [Namespace(id=r[0], title=r[1]) for r in rows]

    def rename_namespace(self, namespace_id: str, title: str) -> None:
        """Change a namespace's title."""
        with self._lock, self._transaction():
            cursor = self._db.execute(
                "UPDATE namespaces SET title = ? WHERE id = ?", (title, namespace_id)
            )
        if cursor.rowcount == 0:
            raise NotFound(f"KV namespace {namespace_id!r} does not exist")

    def set_account_temporary(self, account: str, temporary: bool) -> None:
        """Mark every namespace of ``account`` temporary or not (a claim makes it permanent:
        its bytes leave the temporary accounts' pool)."""
        with self._lock, self._transaction():
            self._db.execute(
                "UPDATE namespaces SET temporary = ? WHERE account = ?", (int(temporary), account)
            )

    def temporary_bytes(self) -> int:
        """Bytes stored in the namespaces of temporary accounts, all together."""
        with self._lock:
            return self.temporary_bytes_locked()

    def temporary_bytes_locked(self) -> int:
        """``temporary_bytes`` for a caller that holds the lock."""
        row = self._db.execute(
            "SELECT COALESCE(SUM(bytes), 0) FROM namespaces WHERE temporary = 1"
        ).fetchone()
        return int(row[0])

    def account_bytes(self, account: str) -> int:
        """Bytes stored in all namespaces of ``account``."""
        with self._lock:
            row = self._db.execute(
                "SELECT COALESCE(SUM(bytes), 0) FROM namespaces WHERE account = ?", (account,)
            ).fetchone()
        return int(row[0])

    def delete_namespace(
        self,
        namespace_id: str,
        *,
        batch_rows: int = DELETE_BATCH_ROWS,
        batch_bytes: int = DELETE_BATCH_BYTES,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Delete a namespace and all its keys, at most ``batch_rows`` entries and (past the
        first) ``batch_bytes`` bytes per transaction: the lock is free between batches, so other
        namespaces are read and written meanwhile however large this one is. The namespace row
        goes in the transaction that finds no key left, so a key written in between goes too; a
        crash midway leaves the namespace with fewer keys, and deleting it again finishes.
        ``stop``, asked before each batch, ends it there (False; True once deleted): a shutdown
        waits for one batch, not for a whole namespace."""
        while True:
            if stop is not None and stop():
                return False
            with self._lock, self._transaction():
                found = self._db.execute(
                    f"SELECT key, {ENTRY_BYTES_SQL} FROM kv WHERE namespace = ? LIMIT ?",
                    (namespace_id, batch_rows),
                ).fetchall()
                if not found:
                    self._db.execute("DELETE FROM namespaces WHERE id = ?", (namespace_id,))
                    return True
                keys, freed = [], 0
                for key, size in found:
                    if keys and freed + size > batch_bytes:
                        break
                    keys.append((namespace_id, key))
                    freed += int(size)
                self._db.executemany("DELETE FROM kv WHERE namespace = ? AND key = ?", keys)
                self._db.execute(
                    "UPDATE namespaces SET bytes = bytes - ? WHERE id = ?", (freed, namespace_id)
                )
