"""What all temporary accounts together store, against one cap for all of them
(``platform.temporary.max_total_stored_bytes``).

Each temporary account's storage is capped (``max_stored_script_bytes``, ``max_kv_bytes``: about
260 MiB, and its versions are on disk twice, in ``platform.db`` and written out under
``accounts/``), and anyone may make accounts: ten uploads of 5 MiB grew the state directory by
99 MiB, and a client could make ten accounts an hour. Nothing bounded temporary storage as a
whole until this cap: the script bytes of every temporary account's kept versions plus the KV
bytes of every temporary account's namespaces.

- An upload (or secret change) of a temporary account checks it in the transaction that stores
  the version (``retention.check_stored``), the versions that upload prunes left out, as for
  the account's own caps; the KV bytes are read from the KV store just then.
- A KV write of a temporary account checks it in the KV store's transaction (``KVPool``,
  ``ember/bindings/kv/pool.py``), with the versions' bytes read from here just before; the
  workers' ``env.KV`` reaches ``kv_pool`` through the supervisor's shared resources.
- A claimed account leaves the pool: its versions are a permanent account's, and its KV
  namespaces are unmarked (``ControlPlane.claim``). Expired accounts leave it when the sweep
  deletes them.

Unset, the cap is a quarter of the state directory's free disk when the control plane opens
(``ember serve`` starts): the versions' second copy makes that about half, which leaves the rest
for permanent accounts, the write-ahead logs and the machine.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from ember.bindings.kv.records import KVPool
from ember.runtime.deployments.config import AccountLimits, PlatformConfig
from ember.runtime.deployments.database import Database
from ember.runtime.deployments.errors import QuotaExceeded
from ember.runtime.deployments.records import Version

KEY = "platform.temporary.max_total_stored_bytes"
FREE_DISK_DIVISOR = 4  # the default cap: this part of the free disk at start
_SCRIPT_BYTES = (
    "SELECT COALESCE(SUM(v.stored_bytes), 0) FROM versions v "
    "JOIN scripts s ON s.id = v.script_id JOIN accounts a ON a.id = s.account_id "
    "WHERE a.kind = 'temporary'"
)


def default_cap(state_dir: Path) -> int:
    """A quarter of the free disk under ``state_dir``."""
    return shutil.disk_usage(state_dir).free // FREE_DISK_DIVISOR


class TemporaryTotal:
    """The cap and the two halves of what temporary accounts store."""

    def __init__(
        self,
        db: Database,
        config: PlatformConfig,
        state_dir: Path,
        kv_bytes: Callable[[], int],
        asset_bytes: Callable[[sqlite3.Connection | None], int] = lambda conn: 0,
    ) -> None:
        self._db = db
        self._kv_bytes = kv_bytes  # the KV store's temporary namespaces, all together
        # Every temporary account's static asset files (and what their sessions still expect):
        # counted by each check, or the pool could be filled with assets and again with
        # versions and KV data.
        self._asset_bytes = asset_bytes
        configured = config.temporary.max_total_stored_bytes
        self.defaulted = configured is None
        self.max_bytes = configured if configured is not None else default_cap(state_dir)
        self._remedy = config.limits_for(temporary=True).remedy("max_total_stored_bytes")

    def script_bytes(self, conn: sqlite3.Connection | None = None) -> int:
        """The script bytes of every temporary account's kept versions."""
        if conn is not None:
            return int(conn.execute(_SCRIPT_BYTES).fetchone()[0])
        with self._db.reader() as reader:
            return int(reader.execute(_SCRIPT_BYTES).fetchone()[0])

    def check_version(
        self,
        conn: sqlite3.Connection,
        version: Version,
        leaving: Sequence[str],
        limits: AccountLimits,
    ) -> None:
        """QuotaExceeded when ``version`` (just stored, in ``conn``'s transaction, by a
        temporary account) takes the pool past the cap; ``leaving``: the versions that
        upload's prune deletes, not counted."""
        if not limits.temporary:
            return
        marks = ", ".join("?" * len(leaving))
        pruned = conn.execute(
            f"SELECT COALESCE(SUM(stored_bytes), 0) FROM versions WHERE id IN ({marks})",
            tuple(leaving),
        ).fetchone()[0]
        total = self.script_bytes(conn) - int(pruned) + self._kv_bytes() + self._asset_bytes(conn)
        if total <= self.max_bytes:
            return
        raise QuotaExceeded(
            "temporary_total_bytes",
            total,
            self.max_bytes,
            f"temporary accounts on this platform store {total - version.stored_bytes:,} bytes "
            f"together (Worker versions, static assets and KV data); this version's "
            f"{version.stored_bytes:,} bytes would make {total:,}, past their limit of "
            f"{self.max_bytes:,} bytes ({KEY}). "
            "Delete Workers or keys you no longer need, or "
            f"{limits.remedy('max_total_stored_bytes')}.",
        )

    def others(self) -> int:
        """What temporary accounts store but static assets: versions and KV data."""
        return self.script_bytes() + self._kv_bytes()

    def check_assets(
        self, stored: int, adding: int, limits: AccountLimits, others: int | None = None
    ) -> None:
        """QuotaExceeded when ``adding`` bytes of a temporary account's asset files, on top of
        ``stored`` (every temporary account's asset files now), the versions and the KV data
        (``others``, read now unless given), take the pool past the cap."""
        total = (self.others() if others is None else others) + stored + adding
        if total <= self.max_bytes:
            return
        raise QuotaExceeded(
            "temporary_total_bytes",
            total,
            self.max_bytes,
            f"temporary accounts on this platform store {total - adding:,} bytes together "
            f"(Worker versions, static assets and KV data); these assets' {adding:,} bytes "
            f"would make {total:,}, past their limit of {self.max_bytes:,} bytes ({KEY}). "
            "Delete Workers or keys you no longer need, or "
            f"{limits.remedy('max_total_stored_bytes')}.",
        )

    def kv_pool(self) -> KVPool:
        """The pool for a temporary account's KV write (``KVPoolSource``)."""
        others = self.script_bytes() + self._asset_bytes(None)
        return KVPool(self.max_bytes, others, KEY, self._remedy)

    def line(self) -> str:
        """For ``ember serve``'s banner."""
        why = "a quarter of the free disk at start" if self.defaulted else "configured"
        return (
            f"temporary accounts: at most {self.max_bytes:,} bytes stored by all of them "
            f"together, Worker versions and KV data ({KEY}: {why})"
        )
