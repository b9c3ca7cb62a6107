"""SQL writes shared by the services: a new immutable version with its modules and secrets,
a deployment with its targets, and the digests they are stamped with.

Each runs inside the caller's transaction (``conn``), so the caller decides what commits together.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid

from ember.runtime.deployments import rows
from ember.runtime.deployments.metadata_limits import stored_bytes
from ember.runtime.deployments.records import (
    Binding,
    Deployment,
    DeploymentTarget,
    Module,
    Script,
    SecretValue,
    Version,
)

DEPLOYMENTS_KEPT = 100  # per worker, newest first (wrangler lists and rolls back from these)


def write_version(
    conn: sqlite3.Connection,
    script: Script,
    main_module: str,
    modules: tuple[Module, ...],
    bindings: tuple[Binding, ...],
    secrets: tuple[SecretValue, ...],
    compatibility_date: str | None,
    compatibility_flags: tuple[str, ...],
    annotations: dict[str, str],
    extra: dict[str, object],
    source: str,
    now: float,
    version_id: str | None = None,
) -> Version:
    """``version_id``: an id chosen beforehand (a secret change writes the version's files out
    under it before the row commits); a new one by default."""
    number = conn.execute(
        "SELECT COALESCE(MAX(number), 0) + 1 FROM versions WHERE script_id = ?", (script.id,)
    ).fetchone()[0]
    version_id = version_id or str(uuid.uuid4())
    texts = (
        json.dumps(list(compatibility_flags)),
        json.dumps([{"name": b.name, "type": b.type, "config": b.config} for b in bindings]),
        json.dumps(annotations),
        json.dumps(extra),
    )
    conn.execute(
        "INSERT INTO versions (id, script_id, number, created_on, source, main_module, "
        "compatibility_date, compatibility_flags, bindings, annotations, metadata, etag, size, "
        "stored_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            version_id,
            script.id,
            number,
            now,
            source,
            main_module,
            compatibility_date,
            *texts,
            etag(modules),
            sum(len(m.content) for m in modules),
            stored_bytes(modules, texts, secrets),
        ),
    )
    conn.executemany(
        "INSERT INTO modules (version_id, name, content_type, content) VALUES (?, ?, ?, ?)",
        [(version_id, m.name, m.content_type, m.content) for m in modules],
    )
    conn.executemany(
        "INSERT INTO version_secrets (version_id, name, type, value) VALUES (?, ?, ?, ?)",
        [(version_id, s.name, s.type, s.value) for s in secrets],
    )
    return rows.require_version(conn, script, version_id)


def insert_deployment(
    conn: sqlite3.Connection,
    script: Script,
    targets: list[DeploymentTarget],
    source: str,
    now: float,
    annotations: dict[str, str],
    author: str,
) -> Deployment:
    seq = conn.execute(
        "SELECT COALESCE(MAX(seq), 0) + 1 FROM deployments WHERE script_id = ?", (script.id,)
    ).fetchone()[0]
    deployment_id = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO deployments (id, script_id, seq, created_on, source, strategy, annotations, "
        "author_email) VALUES (?, ?, ?, ?, ?, 'percentage', ?, ?)",
        (deployment_id, script.id, seq, now, source, json.dumps(annotations), author),
    )
    conn.executemany(
        "INSERT INTO deployment_versions (deployment_id, version_id, percentage) VALUES (?, ?, ?)",
        [(deployment_id, t.version_id, t.percentage) for t in targets],
    )
    # A deployment is a cheap request away (POST .../deployments with the live version): keep
    # the newest DEPLOYMENTS_KEPT so that a loop of them cannot grow the database without end.
    conn.execute(
        "DELETE FROM deployments WHERE script_id = ? AND seq <= ?",
        (script.id, seq - DEPLOYMENTS_KEPT),
    )
    row = conn.execute("SELECT * FROM deployments WHERE id = ?", (deployment_id,)).fetchone()
    return rows.deployment(conn, row)


def etag(modules: tuple[Module, ...]) -> str:
    digest = hashlib.sha256()
    for module in sorted(modules, key=lambda m: m.name):
        for piece in (module.name.encode(), module.content_type.encode(), module.content):
            digest.update(len(piece).to_bytes(8, "big"))
            digest.update(piece)
    return digest.hexdigest()


def secret_digest(secrets: tuple[SecretValue, ...]) -> str:
    digest = hashlib.sha256()
    for secret in sorted(secrets, key=lambda s: s.name):
        digest.update(json.dumps([secret.name, secret.type, secret.value]).encode())
    return digest.hexdigest()
