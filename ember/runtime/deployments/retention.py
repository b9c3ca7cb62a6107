"""Which versions a Worker keeps, and what its account may store.

A Worker keeps its ``versions_kept_per_worker`` newest versions (Cloudflare's rollback window:
"Promote any of the 100 most recent versions") and every version of its live deployment (one,
or two in a gradual deployment), however old. ``retain`` runs in the transaction that stores a
version (an upload, ``POST .../versions``, a secret change), after the version and any
deployment it makes are written:

1. **Prune.** The versions past the window that the live deployment does not use are deleted,
   with their modules and secrets (cascade), and so are the older deployments that named any
   of them: wrangler's ``deployments list`` fetches every version a listed deployment names,
   and ``rollback`` picks its target from that list.
2. **Check the account.** Its kept versions are counted against ``max_versions`` and their
   script bytes against ``max_stored_script_bytes``. A refusal rolls back the whole
   transaction: the new version and the pruning alike.

The pruned ids are returned; the caller removes their written-out files once the transaction has
committed. A crash in between leaves directories without rows, never rows without their files
(the database is the source of truth and a version's directory can be rebuilt from it); those
orphans are removed when ``ember serve`` next starts (``GarbageCollector.remove_orphan_files``).
"""

from __future__ import annotations

import sqlite3

from ember.runtime.deployments import rows
from ember.runtime.deployments.config import AccountLimits
from ember.runtime.deployments.errors import QuotaExceeded
from ember.runtime.deployments.records import Script, Version


def retain(
    conn: sqlite3.Connection, script: Script, version: Version, limits: AccountLimits
) -> tuple[str, ...]:
    """Prune ``script``'s versions past its window, then check the account's kept versions
    (``version`` is the one just stored). Returns the pruned version ids."""
    pruned = prune(conn, script.id, limits.versions_kept_per_worker)
    check_stored(conn, script.account_id, version, limits)
    return pruned


def prune(conn: sqlite3.Connection, script_id: str, kept: int) -> tuple[str, ...]:
    """Delete the versions past the newest ``kept`` that the live deployment does not use, and
    the other deployments that named them. Returns their ids."""
    oldest_kept = conn.execute(
        "SELECT number FROM versions WHERE script_id = ? ORDER BY number DESC LIMIT 1 OFFSET ?",
        (script_id, kept - 1),
    ).fetchone()
    if oldest_kept is None:  # no more versions than the window
        return ()
    live = rows.live_deployment(conn, script_id)
    protected = [t.version_id for t in live.versions] if live else [""]
    # Numbered below the oldest kept version and not in the live deployment.
    past = (
        "FROM versions WHERE script_id = ? AND number < ? "
        f"AND id NOT IN ({', '.join('?' * len(protected))})"
    )
    args = (script_id, oldest_kept[0], *protected)
    pruned = tuple(r["id"] for r in conn.execute("SELECT id " + past, args))
    if not pruned:
        return ()
    conn.execute(
        "DELETE FROM deployments WHERE script_id = ? AND id != ? AND id IN (SELECT "
        f"deployment_id FROM deployment_versions WHERE version_id IN (SELECT id {past}))",
        (script_id, live.id if live else "", *args),
    )
    conn.execute("DELETE " + past, args)
    return pruned


def check_stored(
    conn: sqlite3.Connection, account_id: str, version: Version, limits: AccountLimits
) -> None:
    """QuotaExceeded when the account's kept versions (``version``, just stored, among them)
    are more than ``max_versions`` or hold more script bytes than ``max_stored_script_bytes``."""
    count, total = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(v.size), 0) FROM versions v "
        "JOIN scripts s ON s.id = v.script_id WHERE s.account_id = ?",
        (account_id,),
    ).fetchone()
    if limits.max_versions is not None and count > limits.max_versions:
        raise QuotaExceeded(
            "versions",
            count,
            limits.max_versions,
            f"This account already stores {count - 1} Worker versions; {limits.scope} may "
            f"store at most {limits.max_versions}. Delete a Worker (its versions go with it), "
            f"or {limits.remedy('max_versions')}.",
        )
    limit = limits.max_stored_script_bytes
    if limit is not None and total > limit:
        raise QuotaExceeded(
            "stored_script_bytes",
            total,
            limit,
            f"This account's kept Worker versions hold {total - version.size:,} bytes of "
            f"script; this version's {version.size:,} bytes would make {total:,}, and "
            f"{limits.scope} may store at most {limit:,} bytes of script "
            "(max_stored_script_bytes). Delete Workers you no longer need (their versions go "
            f"with them), or {limits.remedy('max_stored_script_bytes')}.",
        )
