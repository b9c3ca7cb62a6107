"""Per-account KV namespaces: their ids, titles and owners, one with the runtime's KV store.

A namespace is one thing with one id: its row here (which account owns it, its title) and its
values in the runtime's KV store (``ember/bindings/kv/store.py``, the ``NamespaceData`` seam),
which the workers' KV bindings and the KV REST API both read and write. Creating a namespace
registers it (and its owner, for the temporary-account byte limit) in the store; deleting one, or
an expired account, deletes its data there first. ``sync_store`` repairs the store after a crash
between the two (run at platform start).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ember.runtime.deployments import rows
from ember.runtime.deployments.clock import Clock
from ember.runtime.deployments.config import PlatformConfig
from ember.runtime.deployments.database import Database
from ember.runtime.deployments.errors import (
    InvalidRequest,
    NamespaceNotFound,
    NamespaceTitleTaken,
    QuotaExceeded,
)
from ember.runtime.deployments.records import Account, KVNamespace
from ember.sqlite_space import Released

MAX_TITLE = 512


class NamespaceData(Protocol):
    """What the control plane needs from the KV data store (``KVStore`` is one)."""

    def ensure_namespace(
        self,
        namespace_id: str,
        title: str,
        account: str | None = None,
        temporary: bool | None = None,
    ) -> Any:
        """Register a namespace (idempotent) with its owning account, and whether that account
        is temporary (what all temporary accounts store together is capped)."""
        ...

    def set_account_temporary(self, account: str, temporary: bool) -> None:
        """Mark every namespace of ``account`` temporary or not (a claim: not)."""
        ...

    path: Path

    def delete_namespace(
        self,
        namespace_id: str,
        *,
        batch_rows: int = ...,
        batch_bytes: int = ...,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Delete a namespace and every value in it, a bounded batch per transaction; False if
        ``stop`` (asked before each batch) ended it early."""
        ...

    def free_pages(self) -> int:
        """Free pages ``release_free_pages`` would hand back."""
        ...

    def release_free_pages(self, step: int = ...) -> Released:
        """Give deleted pages back and truncate the write-ahead log (after deletions)."""
        ...


class NamespaceService:
    def __init__(
        self, db: Database, config: PlatformConfig, clock: Clock, data: NamespaceData
    ) -> None:
        self._db = db
        self._config = config
        self._clock = clock
        self.data = data

    def create(self, account: Account, title: str) -> KVNamespace:
        _check_title(title)
        limits = self._config.limits_for(account.temporary)
        limit = limits.max_kv_namespaces
        namespace = KVNamespace(uuid.uuid4().hex, account.id, title, self._clock())
        with self._db.transaction() as conn:
            rows.require_live_account(conn, account.id, namespace.created_at)
            if conn.execute(
                "SELECT 1 FROM kv_namespaces WHERE account_id = ? AND title = ?",
                (account.id, title),
            ).fetchone():
                raise NamespaceTitleTaken(title)
            count = conn.execute(
                "SELECT COUNT(*) FROM kv_namespaces WHERE account_id = ?", (account.id,)
            ).fetchone()[0]
            if limit is not None and count >= limit:
                raise QuotaExceeded(
                    "kv_namespaces",
                    count + 1,
                    limit,
                    f"This account already has {count} KV namespaces; {limits.scope} may have "
                    f"at most {limit} KV namespaces. Delete one, or "
                    f"{limits.remedy('max_kv_namespaces')}.",
                )
            conn.execute(
                "INSERT INTO kv_namespaces VALUES (?, ?, ?, ?)",
                (namespace.id, account.id, title, namespace.created_at),
            )
        self.data.ensure_namespace(namespace.id, title, account.id, account.temporary)
        return namespace

    def owner_and_temporary(self, namespace_id: str) -> tuple[str, bool] | None:
        """The owning account's id and whether it is temporary (None: no such namespace)."""
        with self._db.reader() as conn:
            row = conn.execute(
                "SELECT a.id, a.kind FROM kv_namespaces n JOIN accounts a ON a.id = n.account_id "
                "WHERE n.id = ?",
                (namespace_id,),
            ).fetchone()
        return (row["id"], row["kind"] == "temporary") if row else None

    def sync_store(self) -> int:
        """Register every namespace in the data store (idempotent), with whether its account
        is temporary (a crash between a claim and its store update leaves it marked until
        here); returns how many exist."""
        with self._db.reader() as conn:
            found = conn.execute(
                "SELECT n.id, n.title, n.account_id, a.kind FROM kv_namespaces n "
                "JOIN accounts a ON a.id = n.account_id"
            ).fetchall()
        for row in found:
            temporary = row["kind"] == "temporary"
            self.data.ensure_namespace(row["id"], row["title"], row["account_id"], temporary)
        return len(found)

    def list(self, account: Account, *, descending: bool = False) -> list[KVNamespace]:
        order = "DESC" if descending else "ASC"
        with self._db.reader() as conn:
            found = conn.execute(
                f"SELECT * FROM kv_namespaces WHERE account_id = ? ORDER BY title {order}, id",
                (account.id,),
            ).fetchall()
        return [KVNamespace(r["id"], r["account_id"], r["title"], r["created_at"]) for r in found]

    def get(self, account: Account, namespace_id: str) -> KVNamespace:
        """The namespace, if it belongs to this account. Another account's id is 'not found'."""
        with self._db.reader() as conn:
            row = conn.execute(
                "SELECT * FROM kv_namespaces WHERE id = ? AND account_id = ?",
                (namespace_id, account.id),
            ).fetchone()
        if row is None:
            raise NamespaceNotFound(namespace_id)
        return KVNamespace(row["id"], row["account_id"], row["title"], row["created_at"])

    def rename(self, account: Account, namespace_id: str, title: str) -> KVNamespace:
        _check_title(title)
        self.get(account, namespace_id)
        with self._db.transaction() as conn:
            if conn.execute(
                "SELECT 1 FROM kv_namespaces WHERE account_id = ? AND title = ? AND id != ?",
                (account.id, title, namespace_id),
            ).fetchone():
                raise NamespaceTitleTaken(title)
            conn.execute("UPDATE kv_namespaces SET title = ? WHERE id = ?", (title, namespace_id))
        return self.get(account, namespace_id)

    def delete(self, account: Account, namespace_id: str) -> None:
        self.get(account, namespace_id)
        self.data.delete_namespace(namespace_id)
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM kv_namespaces WHERE id = ?", (namespace_id,))


def _check_title(title: object) -> None:
    """Titles are bounded on create and on rename alike (both are stored and listed)."""
    if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
        raise InvalidRequest(f"a KV namespace needs a title of 1 to {MAX_TITLE} characters")
