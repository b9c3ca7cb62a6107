"""Which versions a Worker keeps, and what its account may store.

A Worker keeps its ``versions_kept_per_worker`` newest versions (Cloudflare's rollback window:
"Promote any of the 100 most recent versions") and every version of its live deployment (one,
or two in a gradual deployment), however old.

1. **Check the account** (``check_stored``), in the transaction that stores a version, after
   the version and any deployment it makes are written: the account's kept versions are counted
   against ``max_versions`` and their script bytes against ``max_stored_script_bytes``, leaving
   out the versions this worker would prune. A refusal rolls back the whole transaction.
2. **Prune** (``prune``), once the version is accepted: the versions past the window that the
   live deployment does not use are deleted, with their modules and secrets (cascade), and so
   are the older deployments that named any of them (wrangler's ``deployments list`` fetches
   every version a listed deployment names, and ``rollback`` picks its target from that list).
   An upload prunes in its own transaction after its version started (``POST .../versions``)
   or went live (``PUT``): a version refused after it was stored (its module raised at import)
   is discarded alone, and the versions it would have pushed out stay. A secret change, stored
   and deployed in one transaction, prunes in that transaction (``retain``).

The pruned ids are returned; the caller removes their written-out files once the router no
longer sends them traffic. A crash in between leaves directories without rows, never rows
without their files (the database is the source of truth and a version's directory can be
rebuilt from it); those orphans are removed when ``ember serve`` next starts
(``GarbageCollector.remove_orphan_files``).
"""

from __future__ import annotations

import sqlite3

from ember.runtime.deployments import rows
from ember.runtime.deployments.config import AccountLimits
from ember.runtime.deployments.errors import QuotaExceeded
from ember.runtime.deployments.records import Script, Version
from ember.runtime.deployments.temporary_total import TemporaryTotal


def retain(
    conn: sqlite3.Connection,
    script: Script,
    version: Version,
    limits: AccountLimits,
    temporary: TemporaryTotal | None = None,
) -> tuple[str, ...]:
    """Check the account's kept versions (``version`` is the one just stored), then prune
    ``script``'s versions past its window. Returns the pruned version ids."""
    check_stored(conn, script, version, limits, temporary)
    return prune(conn, script.id, limits.versions_kept_per_worker)


def _past(conn: sqlite3.Connection, script_id: str, kept: int) -> tuple[str, tuple[str, ...]]:
    """The SQL tail (``FROM versions WHERE ...``) and its arguments that select the versions
    past the newest ``kept`` that the live deployment does not use (none when the worker has no
    more versions than the window)."""
    oldest_kept = conn.execute(
        "SELECT number FROM versions WHERE script_id = ? ORDER BY number DESC LIMIT 1 OFFSET ?",
        (script_id, kept - 1),
    ).fetchone()
    live = rows.live_deployment(conn, script_id)
    protected = [t.version_id for t in live.versions] if live else [""]
    # Numbered below the oldest kept version and not in the live deployment.
    past = (
        "FROM versions WHERE script_id = ? AND number < ? "
        f"AND id NOT IN ({', '.join('?' * len(protected))})"
    )
    below = oldest_kept[0] if oldest_kept else 0  # no more versions than the window: none
    return past, (script_id, below, *protected)


def prunable(conn: sqlite3.Connection, script_id: str, kept: int) -> tuple[str, ...]:
    """The ids ``prune`` would delete now."""
    past, args = _past(conn, script_id, kept)
    return tuple(r["id"] for r in conn.execute("SELECT id " + past, args))


def prune(conn: sqlite3.Connection, script_id: str, kept: int) -> tuple[str, ...]:
    """Delete the versions past the newest ``kept`` that the live deployment does not use, and
    the other deployments that named them. Returns their ids."""
    past, args = _past(conn, script_id, kept)
    pruned = tuple(r["id"] for r in conn.execute("SELECT id " + past, args))
    if not pruned:
        return ()
    live = rows.live_deployment(conn, script_id)
    conn.execute(
        "DELETE FROM deployments WHERE script_id = ? AND id != ? AND id IN (SELECT "
        f"deployment_id FROM deployment_versions WHERE version_id IN (SELECT id {past}))",
        (script_id, live.id if live else "", *args),
    )
    conn.execute("DELETE " + past, args)
    return pruned


def check_stored(
    conn: sqlite3.Connection,
    script: Script,
    version: Version,
    limits: AccountLimits,
    temporary: TemporaryTotal | None = None,
) -> None:
    """QuotaExceeded when the account's kept versions (``version``, just stored, among them)
    are more than ``max_versions`` or hold more script bytes than ``max_stored_script_bytes``,
    or (a temporary account's) take all temporary accounts past ``temporary``'s cap.
    ``script``'s versions that its next prune deletes are not counted: a busy worker never
    reaches the caps by its history alone. (Other workers' are: one of their uploads may still
    be starting, and be refused, in which case nothing of theirs is pruned.)"""
    leaving = prunable(conn, script.id, limits.versions_kept_per_worker)
    marks = ", ".join("?" * len(leaving))
    count, total = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(v.stored_bytes), 0) FROM versions v "
        f"JOIN scripts s ON s.id = v.script_id WHERE s.account_id = ? AND v.id NOT IN ({marks})",
        (script.account_id, *leaving),
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
            f"This account's kept Worker versions store {total - version.stored_bytes:,} "
            f"bytes (modules, metadata and secrets); this version's {version.stored_bytes:,} "
            f"bytes would make {total:,}, and {limits.scope} may store at most {limit:,} "
            "bytes (max_stored_script_bytes). Delete Workers you no longer need (their versions go "
            f"with them), or {limits.remedy('max_stored_script_bytes')}.",
        )
    if temporary is not None:
        temporary.check_version(conn, version, leaving, limits)
