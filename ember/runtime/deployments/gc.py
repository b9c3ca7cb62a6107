"""Garbage collection: expired unclaimed accounts, spent challenges, old rate-limit entries.

An expired temporary account is deleted with everything in it: its KV data (through the
``NamespaceData`` seam), its files, then its rows (scripts, versions, modules, secrets,
deployments, namespaces, tails and tokens cascade from the account row). Data and files go first
so that a crash midway leaves an expired (hence unusable) account that the next run finishes.

Before anything of it is deleted, one guarded transaction marks the account (``deleted_at``, its
tokens revoked) if it is still an expired temporary account: the tombstone. Claims are served
while the sweep runs, and the clock may step back (NTP), so an account listed as expired may be
claimed before the sweep reaches it; then the mark changes no row and the account is left whole.
Once marked, the account is gone to everyone whatever the clock says (a claim gets the expired
answer), and the final ``DELETE`` of its row carries the same guard. An account whose deletion
fails stays marked (unusable) and is reported in ``GcReport.failures``; the pass goes on to the
next one, and the next pass tries it again.
ember keeps no other logs on disk: tail sessions stream from memory and end with the account.
A version deleted alone (pruned past its worker's window, or its worker deleted) loses its rows
first and its files after the commit; ``remove_orphan_files``, run when ``ember serve`` starts,
removes the files a crash in between left behind.
Deleted rows are overwritten (``secure_delete``) and both write-ahead logs are truncated, so no
byte of the account remains in the state directory.

The cost of a deletion follows the account's own data, never the size of the databases, and no
step holds a database's lock for long: each transaction deletes one ``SweepBatch`` of rows (a
namespace's keys, a version's modules), and the freed pages go back to the file system a few
at a time (``sqlite_space.py``) instead of a whole-file ``VACUUM``. ``ember serve`` runs
``mark_expired`` and ``collect`` on a thread, so its event loop answers other tenants between
batches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ember.runtime.deployments.accounts import CLAIM_WINDOW
from ember.runtime.deployments.clock import Clock
from ember.runtime.deployments.database import Database
from ember.runtime.deployments.files import AccountFiles
from ember.runtime.deployments.kv_namespaces import NamespaceService


@dataclass(frozen=True)
class GcReport:
    accounts_deleted: tuple[str, ...]
    challenges_pruned: int
    tails_pruned: int
    # What went wrong, one line each for the operator's log; the next pass tries again.
    failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class SweepBatch:
    """How much one transaction of an account's deletion deletes at most: ``rows`` rows and,
    past the first, ``bytes`` bytes of content (a KV value or module may be MiBs); and
    ``pages``, the free pages one step hands back to the file system. Other tenants' queries
    wait for one batch at most."""

    rows: int = 256
    bytes: int = 4 * 1024 * 1024
    pages: int = 1024


class SweepStopped(Exception):
    """``stop`` was called: the account stays expired (unusable) and the next sweep finishes."""


class GarbageCollector:
    def __init__(
        self,
        db: Database,
        files: AccountFiles,
        namespaces: NamespaceService,
        clock: Clock,
        batch: SweepBatch | None = None,
        deleted: Callable[[str], None] | None = None,
    ) -> None:
        self._db = db
        # Told each account deleted, with its files (the static assets' pool forgets it).
        self._deleted = deleted
        self._files = files
        self._namespaces = namespaces
        self._clock = clock
        self._batch = batch or SweepBatch()
        self._stop = threading.Event()
        # Stores whose write-ahead log a pass could not truncate: the next pass tries again.
        self._wal_pending: set[Path] = set()

    def stop(self) -> None:
        """Make a sweep running on another thread end after its current batch (shutdown)."""
        self._stop.set()

    def mark_expired(self) -> list[str]:
        """Mark every expired temporary account as being deleted (``_tombstone``); returns the
        ids marked. ``ember serve`` marks, stops their workers, then hands exactly these to
        ``collect``: an account that expires meanwhile waits for the next pass, so none is
        deleted while its workers still run, and none claimed before its mark is stopped."""
        marked = []
        for account_id in self.expired_accounts():
            self._check_stop()
            if self._tombstone(account_id):
                marked.append(account_id)
        return marked

    def collect(self, accounts: Sequence[str] | None = None) -> GcReport:
        """Delete ``accounts`` (each still an expired temporary account, or marked), by default
        every expired one; then spent challenges, creation counts and tails."""
        now = self._clock()
        listed = self.expired_accounts() if accounts is None else accounts
        expired: list[str] = []
        failures: list[str] = []
        for account_id in listed:
            try:
                if self.delete_account(account_id):
                    expired.append(account_id)
            except SweepStopped:
                raise
            except Exception as exc:  # one account that keeps failing must not block the rest
                failures.append(
                    f"deleting expired temporary account {account_id} failed ({exc}); it stays "
                    "unusable and the next pass tries again"
                )
        with self._db.transaction() as conn:
            challenges = conn.execute(
                "DELETE FROM used_challenges WHERE expires_at <= ?", (now,)
            ).rowcount
            conn.execute(
                "DELETE FROM temporary_account_creations WHERE created_at <= ?", (now - 3600,)
            )
            conn.execute("DELETE FROM account_claims WHERE claimed_at <= ?", (now - CLAIM_WINDOW,))
            tails = conn.execute("DELETE FROM tails WHERE expires_at <= ?", (now,)).rowcount
        failures += self._release(deleted=bool(expired))
        return GcReport(tuple(expired), challenges, tails, tuple(failures))

    def _release(self, deleted: bool) -> list[str]:
        """Deleted rows are zeroed in the database files (secure_delete); the free pages go
        back to the file system, and the write-ahead logs, which still hold older page images,
        are folded in and truncated: after a pass that deleted an account, and whenever pages
        are free (a worker deleted, a pass stopped before this step) or a log is left over."""
        failures = []
        for store in (self._db, self._namespaces.data):
            if not (deleted or store.path in self._wal_pending or store.free_pages()):
                continue
            if store.release_free_pages(self._batch.pages).wal_truncated:
                self._wal_pending.discard(store.path)
            else:
                self._wal_pending.add(store.path)
                failures.append(
                    f"the write-ahead log of {store.path} was not truncated (another connection "
                    "kept reading or writing it): it may hold deleted data until a later pass"
                )
        return failures

    def delete_account(self, account_id: str) -> bool:
        """Delete one expired temporary account and everything it owns; False (nothing
        deleted) if it is not one any more, e.g. claimed since it was listed."""
        if not self._tombstone(account_id):
            return False
        with self._db.reader() as conn:
            namespaces = [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM kv_namespaces WHERE account_id = ?", (account_id,)
                )
            ]
        batch = self._batch
        for namespace_id in namespaces:
            done = self._namespaces.data.delete_namespace(
                namespace_id, batch_rows=batch.rows, batch_bytes=batch.bytes, stop=self._stop.is_set
            )
            if not done:
                self._check_stop()
        self._files.remove_account(account_id)
        with self._db.reader() as conn:
            versions = [
                r["id"]
                for r in conn.execute(
                    "SELECT v.id FROM versions v JOIN scripts s ON s.id = v.script_id "
                    "WHERE s.account_id = ?",
                    (account_id,),
                )
            ]
        for version_id in versions:
            self._delete_version(version_id)
        # What is left is small: scripts, deployments, tokens, namespaces, tails (cascade).
        with self._db.transaction() as conn:
            conn.execute(
                "DELETE FROM accounts WHERE id = ? AND kind = 'temporary' "
                "AND deleted_at IS NOT NULL",
                (account_id,),
            )
        # Again: an upload whose version committed before the mark writes its files out after
        # its commit, so maybe after the first removal (the version's row went above).
        self._files.remove_account(account_id)
        if self._deleted is not None:
            self._deleted(account_id)
        return True

    def _tombstone(self, account_id: str) -> bool:
        """Mark the account as being deleted, if it is still an expired temporary account (or
        marked already: a sweep stopped or failed midway); True if it is marked. One
        transaction, so a claim commits either before it (and this changes nothing) or after
        it (and is refused as expired)."""
        now = self._clock()
        with self._db.transaction() as conn:
            marked = conn.execute(
                "UPDATE accounts SET deleted_at = COALESCE(deleted_at, ?) WHERE id = ? "
                "AND kind = 'temporary' AND (deleted_at IS NOT NULL OR expires_at <= ?)",
                (now, account_id, now),
            ).rowcount
            if marked:
                conn.execute(
                    "UPDATE api_tokens SET revoked_at = ? WHERE account_id = ? "
                    "AND revoked_at IS NULL",
                    (now, account_id),
                )
        return marked == 1

    def _delete_version(self, version_id: str) -> None:
        """A version's modules one batch per transaction, then the version with its secrets
        (bounded per version) and deployment targets (cascade)."""
        while True:
            self._check_stop()
            with self._db.transaction() as conn:
                found = conn.execute(
                    "SELECT rowid, length(content) FROM modules WHERE version_id = ? LIMIT ?",
                    (version_id, self._batch.rows),
                ).fetchall()
                if not found:
                    conn.execute("DELETE FROM versions WHERE id = ?", (version_id,))
                    return
                chosen, size = [], 0
                for rowid, length in found:
                    if chosen and size + length > self._batch.bytes:
                        break
                    chosen.append((rowid,))
                    size += length
                conn.executemany("DELETE FROM modules WHERE rowid = ?", chosen)

    def _check_stop(self) -> None:
        if self._stop.is_set():
            raise SweepStopped("the platform is shutting down; the next start finishes")

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
        """Ids of the temporary accounts past their expiry, or whose deletion began (what
        ``collect`` will delete)."""
        with self._db.reader() as conn:
            return [
                r["id"]
                for r in conn.execute(
                    "SELECT id FROM accounts WHERE kind = 'temporary' "
                    "AND (expires_at <= ? OR deleted_at IS NOT NULL)",
                    (self._clock(),),
                )
            ]
