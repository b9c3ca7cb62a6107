"""The control plane's SQLite file: durable settings, schema migrations, transactions.

Durability choice: WAL with ``synchronous=FULL``. A write is acknowledged (the API answers 200)
only after its transaction committed, and with FULL the WAL is fsynced at every commit, so an
acknowledged deploy, secret or account survives ``kill -9`` and power loss alike. The cost is one
fsync per control-plane write, which is negligible next to an upload.

One ``Database`` object holds one connection guarded by a lock: the control plane's writes are
short, and a single writer is what SQLite wants anyway. Other processes (``ember accounts``) may
open the same file; ``busy_timeout`` makes them wait instead of failing.

A write the disk has no room for (SQLITE_FULL) is rolled back and raised as ``StorageFull``,
recorded in ``health`` (``ember/storage.py``) until a later write succeeds.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ember import sqlite_space
from ember.errors import StateTooNew
from ember.storage import StorageHealth, write_transaction

STORE = "control-plane database"  # how the operator's log and /health name it

# Each entry upgrades the schema by one step; PRAGMA user_version records how many ran.
# Never edit a released step: append a new one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE platform_meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
    CREATE TABLE accounts (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('permanent', 'temporary')),
        email TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL,
        claimed_at REAL,
        claim_token_hash TEXT UNIQUE
    );
    CREATE TABLE api_tokens (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        token_hash TEXT NOT NULL UNIQUE,
        created_at REAL NOT NULL,
        expires_at REAL,
        revoked_at REAL
    );
    CREATE INDEX api_tokens_account ON api_tokens(account_id);
    CREATE TABLE temporary_account_creations (client TEXT NOT NULL, created_at REAL NOT NULL);
    CREATE INDEX temporary_account_creations_client
        ON temporary_account_creations(client, created_at);
    CREATE TABLE used_challenges (token_hash TEXT PRIMARY KEY, expires_at REAL NOT NULL);
    CREATE TABLE scripts (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        created_on REAL NOT NULL,
        modified_on REAL NOT NULL,
        last_deployed_from TEXT NOT NULL,
        subdomain_enabled INTEGER NOT NULL DEFAULT 1,
        previews_enabled INTEGER NOT NULL DEFAULT 0,
        settings TEXT NOT NULL DEFAULT '{}',
        UNIQUE (account_id, name)
    );
    CREATE TABLE versions (
        id TEXT PRIMARY KEY,
        script_id TEXT NOT NULL REFERENCES scripts(id) ON DELETE CASCADE,
        number INTEGER NOT NULL,
        created_on REAL NOT NULL,
        source TEXT NOT NULL,
        main_module TEXT NOT NULL,
        compatibility_date TEXT,
        compatibility_flags TEXT NOT NULL,
        bindings TEXT NOT NULL,
        annotations TEXT NOT NULL,
        metadata TEXT NOT NULL,
        etag TEXT NOT NULL,
        size INTEGER NOT NULL,
        UNIQUE (script_id, number)
    );
    CREATE TABLE modules (
        version_id TEXT NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        content_type TEXT NOT NULL,
        content BLOB NOT NULL,
        PRIMARY KEY (version_id, name)
    );
    CREATE TABLE version_secrets (
        version_id TEXT NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        type TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (version_id, name)
    );
    CREATE TABLE deployments (
        id TEXT PRIMARY KEY,
        script_id TEXT NOT NULL REFERENCES scripts(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        created_on REAL NOT NULL,
        source TEXT NOT NULL,
        strategy TEXT NOT NULL,
        annotations TEXT NOT NULL,
        author_email TEXT NOT NULL,
        UNIQUE (script_id, seq)
    );
    CREATE TABLE deployment_versions (
        deployment_id TEXT NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
        version_id TEXT NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
        percentage REAL NOT NULL,
        PRIMARY KEY (deployment_id, version_id)
    );
    CREATE TABLE kv_namespaces (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        title TEXT NOT NULL,
        created_at REAL NOT NULL,
        UNIQUE (account_id, title)
    );
    CREATE TABLE tails (
        id TEXT PRIMARY KEY,
        script_id TEXT NOT NULL REFERENCES scripts(id) ON DELETE CASCADE,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        filters TEXT NOT NULL
    );
    """,
    # What each version stores besides its module bytes (metadata, secrets) counts against
    # max_stored_script_bytes: the same sum as metadata_limits.stored_bytes, for older rows.
    """
    ALTER TABLE versions ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE versions SET stored_bytes = size
        + length(CAST(compatibility_flags AS BLOB)) + length(CAST(bindings AS BLOB))
        + length(CAST(annotations AS BLOB)) + length(CAST(metadata AS BLOB))
        + COALESCE((SELECT SUM(length(CAST(name AS BLOB)) + length(CAST(content_type AS BLOB)))
                    FROM modules WHERE version_id = versions.id), 0)
        + COALESCE((SELECT SUM(length(CAST(name AS BLOB)) + length(CAST(type AS BLOB))
                               + length(CAST(value AS BLOB)))
                    FROM version_secrets WHERE version_id = versions.id), 0)
    """,
    # Claims per client address (platform.temporary.claims_per_day), as creations are counted.
    """
    CREATE TABLE account_claims (client TEXT NOT NULL, claimed_at REAL NOT NULL);
    CREATE INDEX account_claims_client ON account_claims(client, claimed_at);
    """,
    # The expiry sweep's tombstone: set, in one guarded transaction, before anything of an
    # expired temporary account is deleted. From then on the account is gone to everyone
    # (claims, tokens, tails, routes) whatever the clock says, which may step back.
    """
    ALTER TABLE accounts ADD COLUMN deleted_at REAL
    """,
)


class Database:
    """One SQLite connection with ember's durability settings and explicit transactions."""

    def __init__(self, path: Path, health: StorageHealth | None = None) -> None:
        self.path = path
        self.health = health or StorageHealth()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # create private before sqlite does
        os.close(fd)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=10.0
        )
        self._conn.row_factory = sqlite3.Row
        # Before WAL and the tables: only a file with no table yet takes it (sqlite_space.py).
        sqlite_space.enable_incremental(self._conn)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        # Deleted rows (secrets, GC'd accounts) are overwritten with zeros, not left in free pages.
        self._conn.execute("PRAGMA secure_delete=ON")
        self._conn.execute("PRAGMA busy_timeout=10000")
        self._migrate()

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        with self._lock:
            current = self.schema_version
            if current > len(MIGRATIONS):
                raise StateTooNew(self.path, "schema version", current, len(MIGRATIONS))
            for number in range(current, len(MIGRATIONS)):
                with self.transaction() as conn:
                    for statement in _statements(MIGRATIONS[number]):
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={number + 1}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed (and fsynced) on normal exit, rolled back on error
        (``StorageFull`` when the disk had no room for it)."""
        with self._lock, write_transaction(self._conn, self.health, STORE, self.path):
            yield self._conn

    @contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        """A consistent read snapshot (a deferred transaction)."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    def compact(self) -> None:
        """Rewrite the whole file (``VACUUM``), then truncate the write-ahead log: only where
        nobody waits on it (``ember serve --compact``, before it serves)."""
        with self._lock:
            sqlite_space.vacuum(self._conn, self.health, STORE, self.path)

    def free_pages(self) -> int:
        """Free pages ``release_free_pages`` would hand back."""
        return sqlite_space.free_pages(self._conn, self._lock)

    def release_free_pages(self, step: int = sqlite_space.STEP_PAGES) -> sqlite_space.Released:
        """Give deleted pages back to the file system a few at a time, then truncate the
        write-ahead log (``sqlite_space.py``): what the expiry sweep runs after deleting."""
        return sqlite_space.release_free_pages(self._conn, self._lock, step)

    def switch_to_incremental_vacuum(self, before: Callable[[], None] | None = None) -> bool:
        """A file made before incremental auto-vacuum gets it with one ``VACUUM``; True if it
        did. ``ember serve`` runs it once at start, before serving."""
        return sqlite_space.switch_to_incremental(
            self._conn, self._lock, self.health, STORE, self.path, before=before
        )

    def limit_pages(self, pages: int) -> int:
        """Cap the file at ``pages`` pages, or at its size now if that is larger (SQLite keeps
        at least that); returns the cap. A write past it fails as on a full disk: the seam
        ``ember serve --storage-max-pages`` and its tests use."""
        with self._lock:
            return int(self._conn.execute(f"PRAGMA max_page_count = {int(pages)}").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]
