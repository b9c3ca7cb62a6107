"""Worker secrets: secret bindings of a version, changed by deriving a new version.

As on Cloudflare, ``secret put`` and ``secret delete`` create a new version (the live one with
the secret changed) and deploy it, tagged ``workers/triggered_by: secret``. Values are stored only
in ``version_secrets`` (a 0600 database in a 0700 directory), never returned by the API, never in
a record's repr and never logged.

A change is all or nothing, files first: the new version's modules (the live version's) are
written out under its id before its row commits, as an upload's are, so a disk with room for the
row but not for the files refuses the change with ``StorageFull`` and nothing else, and the row
never names a version the platform cannot run. A refused commit removes the files again; a crash
in between leaves a directory without a row, removed when ``ember serve`` next starts.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ember.runtime.deployments import rows
from ember.runtime.deployments.bindings import MAX_SECRET_BYTES, SECRET_TYPES
from ember.runtime.deployments.clock import Clock
from ember.runtime.deployments.database import Database
from ember.runtime.deployments.errors import InvalidRequest, SecretNotFound, VarTooLarge
from ember.runtime.deployments.files import AccountFiles
from ember.runtime.deployments.metadata_limits import check_name
from ember.runtime.deployments.records import (
    Account,
    DeploymentTarget,
    Script,
    SecretValue,
    Version,
)
from ember.runtime.deployments.scripts import ScriptService
from ember.runtime.deployments.versions import derive_version
from ember.runtime.deployments.writes import insert_deployment

SecretChange = Callable[[Version, tuple[SecretValue, ...]], tuple[SecretValue, ...]]


@dataclass(frozen=True)
class DerivedVersion:
    """The version a secret change made, and the versions it pruned (whose files the caller
    removes)."""

    version: Version
    pruned: tuple[str, ...] = ()


class SecretService:
    def __init__(
        self, db: Database, scripts: ScriptService, files: AccountFiles, clock: Clock
    ) -> None:
        self._db = db
        self._scripts = scripts
        self._files = files
        self._clock = clock

    def list(self, account: Account, name: str) -> list[tuple[str, str]]:
        """(name, type) of the secrets of the live version (or the newest, if none is live)."""
        with self._db.reader() as conn:
            script = rows.require_script(conn, account.id, name)
            base, _ = _base_version(conn, script)
            return list(base.secret_names) if base else []

    def put(self, account: Account, name: str, secret: SecretValue, source: str) -> DerivedVersion:
        _check(secret)

        def change(base: Version, current: tuple[SecretValue, ...]) -> tuple[SecretValue, ...]:
            if any(b.name == secret.name for b in base.bindings):
                raise InvalidRequest(
                    f"{secret.name!r} is already a non-secret binding of this "
                    "Worker; rename the var or the secret"
                )
            return tuple(s for s in current if s.name != secret.name) + (secret,)

        return self._derive(account, name, change, source)

    def patch(
        self,
        account: Account,
        name: str,
        changes: Mapping[str, SecretValue | None],
        source: str,
    ) -> DerivedVersion:
        """Set (a value) or delete (None) several secrets in one new version: a JSON merge patch
        (``secrets-bulk``), so a secret not named is kept and deleting an absent one is a no-op.
        One bad secret refuses the whole patch, naming it."""
        for secret in changes.values():
            if secret is not None:
                _check(secret)

        def change(base: Version, current: tuple[SecretValue, ...]) -> tuple[SecretValue, ...]:
            for secret_name, secret in changes.items():
                if secret is not None and any(b.name == secret_name for b in base.bindings):
                    raise InvalidRequest(
                        f"{secret_name!r} is already a non-secret binding of this "
                        "Worker; rename the var or the secret"
                    )
            kept = tuple(s for s in current if s.name not in changes)
            return kept + tuple(s for s in changes.values() if s is not None)

        return self._derive(account, name, change, source)

    def delete(self, account: Account, name: str, secret_name: str, source: str) -> DerivedVersion:
        def change(base: Version, current: tuple[SecretValue, ...]) -> tuple[SecretValue, ...]:
            if not any(s.name == secret_name for s in current):
                raise SecretNotFound(secret_name, name)
            return tuple(s for s in current if s.name != secret_name)

        return self._derive(account, name, change, source)

    def _derive(
        self, account: Account, name: str, change: SecretChange, source: str
    ) -> DerivedVersion:
        """Files first, then the row (see the module docstring). Runs the change once, before
        anything is written, so a refused change writes nothing either."""
        with self._db.reader() as conn:
            script = rows.require_script(conn, account.id, name)
            base, _ = _base_version(conn, script)
            if base is None:
                raise InvalidRequest(f"Worker {name!r} has no version yet; deploy it first")
            secrets = change(base, rows.secrets_of(conn, base.id))
            modules = rows.modules_of(conn, base.id)
        version_id = str(uuid.uuid4())
        self._files.materialize(account.id, version_id, base.main_module, modules)
        try:
            return self._commit(account, name, base.id, secrets, source, version_id)
        except BaseException:
            self._files.remove_version(account.id, version_id)
            raise

    def _commit(
        self,
        account: Account,
        name: str,
        base_id: str,
        secrets: tuple[SecretValue, ...],
        source: str,
        version_id: str,
    ) -> DerivedVersion:
        """The new version's row (and deployment, if its base is live), if the base is still
        the version the files were written from."""
        now = self._clock()
        with self._db.transaction() as conn:
            rows.require_live_account(conn, account.id, now)
            script = rows.require_script(conn, account.id, name)
            base, live = _base_version(conn, script)
            if base is None or base.id != base_id:
                # A deployment (not under the worker's upload lock) moved it meanwhile.
                raise InvalidRequest(
                    f"Worker {name!r}'s live version changed while the secrets were being "
                    "changed; nothing was changed, try again"
                )
            version = derive_version(conn, script, base, secrets, "secret", source, now, version_id)
            # Before anything is deployed: a refused change leaves no version, no deployment
            # (and the caller removes the files written for it).
            self._scripts.check_fits(conn, account, version, base)
            if live:
                insert_deployment(
                    conn,
                    script,
                    [DeploymentTarget(version.id, 100.0)],
                    source,
                    now,
                    {"workers/triggered_by": "secret"},
                    account.email,
                )
            return DerivedVersion(version, self._scripts.retain(conn, account, script, version))


def _check(secret: SecretValue) -> None:
    """A secret any version may hold: a known type, an identifier name, at most 5 KiB."""
    if secret.type not in SECRET_TYPES:
        raise InvalidRequest(
            f"secret type {secret.type!r} is not supported; use {', '.join(sorted(SECRET_TYPES))}"
        )
    too_long = check_name(secret.name, "secret")
    if too_long:
        raise InvalidRequest(too_long)
    if not secret.name.isidentifier():
        raise InvalidRequest(f"secret name {secret.name!r} must be an identifier")
    try:
        size = len(secret.value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate ("\ud800") that JSON let through
        raise InvalidRequest(
            f"secret {secret.name!r} is not valid Unicode text (it has a lone surrogate)"
        ) from None
    if size > MAX_SECRET_BYTES:
        raise VarTooLarge(
            f"secret {secret.name!r} is {size:,} bytes; a variable or secret is at most "
            f"{MAX_SECRET_BYTES:,} bytes"
        )


def _base_version(conn: sqlite3.Connection, script: Script) -> tuple[Version | None, bool]:
    """The version secrets apply to, and whether it is live (single-version deployment)."""
    deployment = rows.live_deployment(conn, script.id)
    if deployment is not None:
        live_id = rows.full_version_id(deployment)
        if live_id is None:
            raise InvalidRequest(
                "this Worker is in a gradual deployment (two versions); finish or roll it back "
                "before changing secrets"
            )
        return rows.require_version(conn, script, live_id), True
    return rows.latest_version(conn, script.id), False
