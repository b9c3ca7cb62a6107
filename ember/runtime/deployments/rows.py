"""SQLite rows -> records, and the few queries every control-plane service shares."""

from __future__ import annotations

import json
import sqlite3

from ember.runtime.deployments.errors import (
    TOKEN_NOT_VALID,
    ScriptNotFound,
    Unauthenticated,
    VersionNotFound,
)
from ember.runtime.deployments.records import (
    Binding,
    Deployment,
    DeploymentTarget,
    Module,
    Script,
    SecretValue,
    Version,
)


def script(row: sqlite3.Row) -> Script:
    return Script(
        id=row["id"],
        account_id=row["account_id"],
        name=row["name"],
        created_on=row["created_on"],
        modified_on=row["modified_on"],
        last_deployed_from=row["last_deployed_from"],
        subdomain_enabled=bool(row["subdomain_enabled"]),
        previews_enabled=bool(row["previews_enabled"]),
        settings=json.loads(row["settings"]),
    )


def require_live_account(conn: sqlite3.Connection, account_id: str, now: float) -> None:
    """In a write transaction: refuse, as its token now is, a write for an account gone since
    the request authenticated (expired, or marked by the expiry sweep, ``gc.py``). Else a
    write that authenticated just before the expiry stores a version or namespace after the
    sweep listed the account's, and its data or files outlive the account."""
    row = conn.execute(
        "SELECT expires_at, deleted_at FROM accounts WHERE id = ?", (account_id,)
    ).fetchone()
    if (
        row is None
        or row["deleted_at"] is not None
        or (row["expires_at"] is not None and now >= row["expires_at"])
    ):
        raise Unauthenticated(TOKEN_NOT_VALID)


def find_script(conn: sqlite3.Connection, account_id: str, name: str) -> Script | None:
    row = conn.execute(
        "SELECT * FROM scripts WHERE account_id = ? AND name = ?", (account_id, name)
    ).fetchone()
    return script(row) if row else None


def require_script(conn: sqlite3.Connection, account_id: str, name: str) -> Script:
    found = find_script(conn, account_id, name)
    if found is None:
        raise ScriptNotFound(name)
    return found


def version(conn: sqlite3.Connection, row: sqlite3.Row) -> Version:
    secret_rows = conn.execute(
        "SELECT name, type FROM version_secrets WHERE version_id = ? ORDER BY name", (row["id"],)
    ).fetchall()
    return Version(
        id=row["id"],
        script_id=row["script_id"],
        number=row["number"],
        created_on=row["created_on"],
        source=row["source"],
        main_module=row["main_module"],
        compatibility_date=row["compatibility_date"],
        compatibility_flags=tuple(json.loads(row["compatibility_flags"])),
        bindings=tuple(
            Binding(b["name"], b["type"], b.get("config", {})) for b in json.loads(row["bindings"])
        ),
        secret_names=tuple((r["name"], r["type"]) for r in secret_rows),
        annotations=json.loads(row["annotations"]),
        metadata=json.loads(row["metadata"]),
        etag=row["etag"],
        size=row["size"],
        stored_bytes=row["stored_bytes"],
    )


def require_version(conn: sqlite3.Connection, script: Script, version_id: str) -> Version:
    row = conn.execute(
        "SELECT * FROM versions WHERE id = ? AND script_id = ?", (version_id, script.id)
    ).fetchone()
    if row is None:
        raise VersionNotFound(version_id, script.name)
    return version(conn, row)


def latest_version(conn: sqlite3.Connection, script_id: str) -> Version | None:
    row = conn.execute(
        "SELECT * FROM versions WHERE script_id = ? ORDER BY number DESC LIMIT 1", (script_id,)
    ).fetchone()
    return version(conn, row) if row else None


def secrets_of(conn: sqlite3.Connection, version_id: str) -> tuple[SecretValue, ...]:
    rows = conn.execute(
        "SELECT name, type, value FROM version_secrets WHERE version_id = ? ORDER BY name",
        (version_id,),
    ).fetchall()
    return tuple(SecretValue(r["name"], r["type"], r["value"]) for r in rows)


def modules_of(conn: sqlite3.Connection, version_id: str) -> tuple[Module, ...]:
    rows = conn.execute(
        "SELECT name, content_type, content FROM modules WHERE version_id = ? ORDER BY name",
        (version_id,),
    ).fetchall()
    return tuple(Module(r["name"], r["content_type"], bytes(r["content"])) for r in rows)


def deployment(conn: sqlite3.Connection, row: sqlite3.Row) -> Deployment:
    targets = conn.execute(
        # In the order the deployment named them, as it was asked for ("A at 30% and B at 70%").
        "SELECT version_id, percentage FROM deployment_versions WHERE deployment_id = ? "
        "ORDER BY rowid",
        (row["id"],),
    ).fetchall()
    return Deployment(
        id=row["id"],
        script_id=row["script_id"],
        seq=row["seq"],
        created_on=row["created_on"],
        source=row["source"],
        strategy=row["strategy"],
        versions=tuple(DeploymentTarget(t["version_id"], t["percentage"]) for t in targets),
        annotations=json.loads(row["annotations"]),
        author_email=row["author_email"],
    )


def live_deployment(conn: sqlite3.Connection, script_id: str) -> Deployment | None:
    row = conn.execute(
        "SELECT * FROM deployments WHERE script_id = ? ORDER BY seq DESC LIMIT 1", (script_id,)
    ).fetchone()
    return deployment(conn, row) if row else None


def full_version_id(deployment: Deployment | None) -> str | None:
    """The version a deployment sends all traffic to, if it is a single-version deployment."""
    if deployment and len(deployment.versions) == 1:
        return deployment.versions[0].version_id
    return None
