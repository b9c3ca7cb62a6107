"""Garbage collection: expired unclaimed accounts, spent challenges, old rate-limit entries.

An expired temporary account is deleted with everything in it: its KV data (through the
``NamespaceData`` seam), its files, then its rows (scripts, versions, modules, secrets,
deployments, namespaces, tails and tokens cascade from the account row). Data and files go first
so that a crash midway leaves an expired (hence unusable) account that the next run finishes.
ember keeps no other logs on disk: tail sessions stream from memory and end with the account.
A version deleted alone (pruned past its worker's window, or its worker deleted) loses its rows
first and its files after the commit; ``remove_orphan_files``, run when ``ember serve`` starts,
removes the files a crash in between left behind.
Deleted rows are overwritten (``secure_delete``) and both write-ahead logs are truncated, so no
byte of the account remains in the state directory.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.runtime.deployments.clock import Clock
from ember.runtime.deployments.database import Database
from ember.runtime.deployments.files import AccountFiles
from ember.runtime.deployments.kv_namespaces import NamespaceService


@dataclass(frozen=True)
class GcReport:
    accounts_deleted: tuple[str, ...]
    challenges_pruned: int
    tails_pruned: int


class GarbageCollector:
    def __init__(
        self, db: Database, files: AccountFiles, namespaces: NamespaceService, clock: Clock
    ) -> None:
        self._db = db
        self._files = files
        self._namespaces = namespaces
        self._clock = clock

    def collect(self) -> GcReport:
        now = self._clock()
        expired = self.expired_accounts()
        for account_id in expired:
            self.delete_account(account_id)
        with self._db.transaction() as conn:
            challenges = conn.execute(
                "DELETE FROM used_challenges WHERE expires_at <= ?", (now,)
            ).rowcount
            conn.execute(
                "DELETE FROM temporary_account_creations WHERE created_at <= ?", (now - 3600,)
            )
            tails = conn.execute("DELETE FROM tails WHERE expires_at <= ?", (now,)).rowcount
        if expired:
            # Deleted rows are zeroed in the database files (secure_delete); the write-ahead
            # logs still hold older page images until they are folded in and truncated.
            self._db.compact()
            self._namespaces.data.compact()
        return GcReport(tuple(expired), challenges, tails)

    def delete_account(self, account_id: str) -> None:
        """Delete one account and everything it owns (also used by operators)."""
        with self._db.reader() as conn:
            namespaces = [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM kv_namespaces WHERE account_id = ?", (account_id,)
                )
            ]
        for namespace_id in namespaces:
            self._namespaces.data.delete_namespace(namespace_id)
        self._files.remove_account(account_id)
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM accounts WHERE id = ?", (account_id,))

    def remove_orphan_files(self) -> int:
        """Remove written-out version directories whose version has no row, and staging
        directories of write-outs cut short; returns how many. Only while nothing writes
        versions out: ``ember serve`` runs it at start-up, before it serves."""
        # Listed before the rows are read: a directory is written only after its version's row
        # committed, so no directory listed here can belong to a row not yet read.
        entries = self._files.version_entries()
        with self._db.reader() as conn:
            known = {
                (r["account_id"], r["id"])
                for r in conn.execute(
                    "SELECT s.account_id, v.id FROM versions v JOIN scripts s ON s.id = v.script_id"
                )
            }
        orphans = [entry for entry in entries if entry not in known]
        for account_id, name in orphans:
            self._files.remove_version(account_id, name)
        return len(orphans)

    def expired_accounts(self) -> list[str]:
        """Ids of the temporary accounts past their expiry (what ``collect`` will delete)."""
        with self._db.reader() as conn:
            return [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM accounts WHERE kind = 'temporary' AND expires_at <= ?",
                    (self._clock(),),
                )
            ]
