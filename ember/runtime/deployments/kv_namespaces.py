"""Per-account KV namespaces: metadata only (id, title).

The values live in the runtime's KV store (``ember/bindings/kv/store.py``); the control plane
reaches it through the ``NamespaceData`` seam so that deleting a namespace, or an expired account,
also deletes its data. Until the runtime is wired in, no data seam is configured.
"""

from __future__ import annotations

import uuid
from typing import Protocol

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

MAX_TITLE = 512


class NamespaceData(Protocol):
    """What the control plane needs from the KV data store."""

    def drop_namespace(self, namespace_id: str) -> None: ...


class NamespaceService:
    def __init__(
        self, db: Database, config: PlatformConfig, clock: Clock, data: NamespaceData | None = None
    ) -> None:
        self._db = db
        self._config = config
        self._clock = clock
        self.data = data

    def create(self, account: Account, title: str) -> KVNamespace:
        if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
            raise InvalidRequest(f"a KV namespace needs a title of 1 to {MAX_TITLE} characters")
        limit = self._config.limits_for(account.temporary).max_kv_namespaces
        namespace = KVNamespace(uuid.uuid4().hex, account.id, title, self._clock())
        with self._db.transaction() as conn:
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
                    f"temporary accounts may have at most {limit} KV namespaces",
                )
            conn.execute(
                "INSERT INTO kv_namespaces VALUES (?, ?, ?, ?)",
                (namespace.id, account.id, title, namespace.created_at),
            )
        return namespace

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
        if self.data is not None:
            self.data.drop_namespace(namespace_id)
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM kv_namespaces WHERE id = ?", (namespace_id,))
