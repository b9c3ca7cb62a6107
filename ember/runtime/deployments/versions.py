"""The new versions of a worker: one from an upload, or a copy of another with other secrets.

An upload's bindings are resolved against the version they inherit from (``bindings.py``), then
the version is written with its modules and secrets (``writes.py``), inside the caller's
transaction. Separate from ``scripts.py``, which decides when a version is made and what else
commits with it (the worker, its deployment, the caps); this module only builds the version.
"""

from __future__ import annotations

import sqlite3

from ember.runtime.deployments import rows
from ember.runtime.deployments.bindings import PreviousVersion, resolve_bindings
from ember.runtime.deployments.records import Script, SecretValue, Version, WorkerUpload
from ember.runtime.deployments.writes import write_version


def version_from_upload(
    conn: sqlite3.Connection,
    script: Script,
    upload: WorkerUpload,
    source: str,
    strict_inherit: bool,
    now: float,
    triggered_by: str,
) -> Version:
    """A version from ``upload``: its bindings resolved against the version they inherit from
    (``strict_inherit``: a missing one is an error)."""

    def previous(ref: str) -> PreviousVersion | None:
        base = (
            rows.latest_version(conn, script.id)
            if ref == "latest"
            else _version_or_none(conn, script, ref)
        )
        if base is None:
            return None
        return PreviousVersion(base.id, base.bindings, rows.secrets_of(conn, base.id))

    def namespace_exists(namespace_id: str) -> bool:
        return (
            conn.execute(
                "SELECT 1 FROM kv_namespaces WHERE id = ? AND account_id = ?",
                (namespace_id, script.account_id),
            ).fetchone()
            is not None
        )

    bindings, secrets = resolve_bindings(
        upload.bindings,
        previous=previous,
        strict=strict_inherit,
        keep_types=upload.keep_bindings,
        keep_vars=upload.keep_vars,
        namespace_exists=namespace_exists,
    )
    return write_version(
        conn,
        script,
        upload.main_module,
        upload.modules,
        bindings,
        secrets,
        upload.compatibility_date,
        upload.compatibility_flags,
        {**upload.annotations, "workers/triggered_by": triggered_by},
        upload.extra_metadata,
        source,
        now,
    )


def derive_version(
    conn: sqlite3.Connection,
    script: Script,
    base: Version,
    secrets: tuple[SecretValue, ...],
    triggered_by: str,
    source: str,
    now: float,
    version_id: str | None = None,
) -> Version:
    """A copy of ``base`` with other secrets (``secret put/delete``), under ``version_id`` if
    given."""
    return write_version(
        conn,
        script,
        base.main_module,
        rows.modules_of(conn, base.id),
        base.bindings,
        secrets,
        base.compatibility_date,
        base.compatibility_flags,
        {
            **{k: v for k, v in base.annotations.items() if k == "workers/tag"},
            "workers/triggered_by": triggered_by,
        },
        base.metadata,
        source,
        now,
        version_id,
    )


def _version_or_none(conn: sqlite3.Connection, script: Script, version_id: str) -> Version | None:
    row = conn.execute(
        "SELECT * FROM versions WHERE id = ? AND script_id = ?", (version_id, script.id)
    ).fetchone()
    return rows.version(conn, row) if row else None
