"""Workers (scripts), their immutable versions, deployments and rollback.

Every state change is one transaction: an upload creates the script (if new), the version, its
modules and secrets, and (on the PUT path) the deployment that makes it live, or does nothing at
all. A failed upload therefore never leaves a half-made version, and never touches the live one.
The versions past the worker's window are pruned only once the new version is accepted (started
or live), in a transaction of their own (``prune``, ``retention.py``): a version refused after it
was stored is discarded (``discard_undeployed``) and nothing else is deleted. How a version is
built from an upload is ``versions.py``.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from dataclasses import dataclass

from ember.runtime.deployments import rows
from ember.runtime.deployments.clock import Clock
from ember.runtime.deployments.config import PlatformConfig
from ember.runtime.deployments.database import Database
from ember.runtime.deployments.errors import (
    InvalidRequest,
    QuotaExceeded,
    ScriptNotFound,
    UploadTooLarge,
    VersionNotFound,
)
from ember.runtime.deployments.metadata_limits import (
    VAR_TYPES,
    check_init_size,
    check_var_count,
    init_size,
)
from ember.runtime.deployments.records import (
    Account,
    Deployment,
    DeploymentTarget,
    Module,
    Script,
    SecretValue,
    Version,
    WorkerUpload,
)
from ember.runtime.deployments.retention import check_stored, prune, retain
from ember.runtime.deployments.temporary_total import TemporaryTotal
from ember.runtime.deployments.traffic import check_targets
from ember.runtime.deployments.triggers import deployment_tags, version_trigger
from ember.runtime.deployments.versions import version_from_upload
from ember.runtime.deployments.worker_limits import check_tier, parse_limits
from ember.runtime.deployments.writes import insert_deployment

MAX_SCRIPT_NAME = 63


@dataclass(frozen=True)
class UploadResult:
    script: Script
    version: Version
    deployment: Deployment | None


class ScriptService:
    def __init__(
        self,
        db: Database,
        config: PlatformConfig,
        clock: Clock,
        total: TemporaryTotal | None = None,
    ) -> None:
        self._db = db
        self._config = config
        self._clock = clock
        self._total = total  # all temporary accounts' storage together (temporary_total.py)

    # -- queries --------------------------------------------------------------------------------

    def get(self, account: Account, name: str) -> Script:
        with self._db.reader() as conn:
            return rows.require_script(conn, account.id, name)

    def list(self, account: Account) -> list[Script]:
        with self._db.reader() as conn:
            found = conn.execute(
                "SELECT * FROM scripts WHERE account_id = ? ORDER BY name", (account.id,)
            ).fetchall()
        return [rows.script(r) for r in found]

    def versions(self, account: Account, name: str) -> list[Version]:
        """Newest first."""
        with self._db.reader() as conn:
            script = rows.require_script(conn, account.id, name)
            found = conn.execute(
                "SELECT * FROM versions WHERE script_id = ? ORDER BY number DESC", (script.id,)
            ).fetchall()
            return [rows.version(conn, r) for r in found]

    def version(self, account: Account, name: str, version_id: str) -> Version:
        with self._db.reader() as conn:
            return self._require_version(
                conn, account, rows.require_script(conn, account.id, name), version_id
            )

    def _require_version(
        self, conn: sqlite3.Connection, account: Account, script: Script, version_id: str
    ) -> Version:
        """The version, else VersionNotFound saying that old versions are pruned."""
        try:
            return rows.require_version(conn, script, version_id)
        except VersionNotFound:
            kept = self._config.limits_for(account.temporary).versions_kept_per_worker
            raise VersionNotFound(version_id, script.name, kept) from None

    def modules(self, version_id: str) -> tuple[Module, ...]:
        with self._db.reader() as conn:
            return rows.modules_of(conn, version_id)

    def secret_values(self, version_id: str) -> tuple[SecretValue, ...]:
        """Secret values of a version, for the runtime that puts them in the worker's env."""
        with self._db.reader() as conn:
            return rows.secrets_of(conn, version_id)

    def deployments(self, account: Account, name: str) -> list[Deployment]:
        """Newest first, as Cloudflare lists them."""
        with self._db.reader() as conn:
            script = rows.require_script(conn, account.id, name)
            found = conn.execute(
                "SELECT * FROM deployments WHERE script_id = ? ORDER BY seq DESC", (script.id,)
            ).fetchall()
            return [rows.deployment(conn, r) for r in found]

    def live(self, account: Account, name: str) -> Deployment | None:
        with self._db.reader() as conn:
            return rows.live_deployment(conn, rows.require_script(conn, account.id, name).id)

    # -- uploads --------------------------------------------------------------------------------

    def upload(
        self,
        account: Account,
        name: str,
        upload: WorkerUpload,
        *,
        deploy: bool,
        source: str,
        strict_inherit: bool = True,
        author: str | None = None,
        create: bool = False,
    ) -> UploadResult:
        """Store a new immutable version; with ``deploy`` also make it live (100%).

        ``deploy=False`` is ``POST .../versions``, which needs the worker to exist already
        unless ``create`` (``ember serve``'s first deploy: store, start, then deploy).
        """
        check_script_name(name)
        limits = self._config.limits_for(account.temporary)
        if upload.size > limits.max_script_bytes:
            raise UploadTooLarge(upload.size, limits.max_script_bytes, account.temporary)
        check_tier(parse_limits(upload.extra_metadata.get("limits")), limits, account.temporary)
        now = self._clock()
        with self._db.transaction() as conn:
            rows.require_live_account(conn, account.id, now)
            script = rows.find_script(conn, account.id, name)
            if script is None:
                if not (deploy or create):
                    raise ScriptNotFound(name)
                script = self._create_script(conn, account, name, source, now)
            trigger = version_trigger(deployed=deploy or create)  # create: a Scripts PUT
            version = version_from_upload(
                conn, script, upload, source, strict_inherit, now, triggered_by=trigger
            )
            self.check_fits(conn, account, version)
            conn.execute(
                "UPDATE scripts SET modified_on = ?, last_deployed_from = ? WHERE id = ?",
                (now, source, script.id),
            )
            deployment = None
            if deploy:
                deployment = insert_deployment(
                    conn,
                    script,
                    [DeploymentTarget(version.id, 100.0)],
                    source,
                    now,
                    {"workers/triggered_by": "upload"},
                    author or account.email,
                )
            # The caps, atomically with the store; the pruning waits for ``prune``.
            limits = self._config.limits_for(account.temporary)
            check_stored(conn, script, version, limits, self._total)
            script = rows.require_script(conn, account.id, name)
        return UploadResult(script, version, deployment)

    def prune(self, account: Account, name: str) -> tuple[str, ...]:
        """Delete the worker's versions past its window (``retention.py``), once an upload's
        version is accepted; returns their ids, whose files the caller removes after the
        router stopped sending them traffic."""
        kept = self._config.limits_for(account.temporary).versions_kept_per_worker
        with self._db.transaction() as conn:
            script = rows.find_script(conn, account.id, name)
            return prune(conn, script.id, kept) if script else ()

    def retain(
        self, conn: sqlite3.Connection, account: Account, script: Script, version: Version
    ) -> tuple[str, ...]:
        """After storing and deploying ``version`` in one transaction (a secret change): refuse
        if the account's kept versions are past its caps, else prune the worker's versions
        past its window (``retention.py``)."""
        limits = self._config.limits_for(account.temporary)
        return retain(conn, script, version, limits, self._total)

    def check_fits(
        self,
        conn: sqlite3.Connection,
        account: Account,
        version: Version,
        base: Version | None = None,
    ) -> None:
        """Refuse (inside the transaction that stores ``version``, so nothing is kept) a version
        with more vars and secrets than the account's tier allows, or whose bindings, vars,
        secrets and flags would not fit the worker's Init frame: it could never start.

        ``base``: the version a secret change derives ``version`` from. A change that grows
        neither the count nor the Init past the base's is never refused: a version stored
        before these limits (more secrets than they allow) must be able to shed secrets one
        change at a time, not only by a redeploy."""
        secrets = rows.secrets_of(conn, version.id)
        count = _vars_and_secrets(version, secrets)
        size = init_size(version.bindings, secrets, version.compatibility_flags)
        if base is not None:
            base_secrets = rows.secrets_of(conn, base.id)
            base_size = init_size(base.bindings, base_secrets, base.compatibility_flags)
            if count <= _vars_and_secrets(base, base_secrets) and size <= base_size:
                return
        check_var_count(count, account.temporary)
        check_init_size(version.bindings, secrets, version.compatibility_flags)

    def _create_script(
        self, conn: sqlite3.Connection, account: Account, name: str, source: str, now: float
    ) -> Script:
        limits = self._config.limits_for(account.temporary)
        limit = limits.max_workers
        if limit is not None:
            count = conn.execute(
                "SELECT COUNT(*) FROM scripts WHERE account_id = ?", (account.id,)
            ).fetchone()[0]
            if count >= limit:
                raise QuotaExceeded(
                    "workers",
                    count + 1,
                    limit,
                    f"This account already has {count} Workers; {limits.scope} may have at "
                    f"most {limit}. Delete one, or {limits.remedy('max_workers')}.",
                )
        script_id = uuid.uuid4().hex
        conn.execute(
            "INSERT INTO scripts (id, account_id, name, created_on, modified_on, "
            "last_deployed_from) VALUES (?, ?, ?, ?, ?, ?)",
            (script_id, account.id, name, now, now, source),
        )
        return rows.require_script(conn, account.id, name)

    # -- deployments ----------------------------------------------------------------------------

    def deploy(
        self,
        account: Account,
        name: str,
        targets: list[DeploymentTarget],
        annotations: dict[str, str],
        *,
        force: bool,
        source: str,
        triggered_by: str | None = None,
    ) -> Deployment:
        """``POST .../deployments``: point traffic at existing versions.

        Tagged as Cloudflare tags it (``triggers.py``): ``triggered_by`` when the caller knows
        it (a Scripts PUT's deployment is ``upload``), else ``deployment`` or ``rollback``; a
        rollback whose secrets differ is refused with 10220 unless ``force``.
        """
        check_targets(targets)
        now = self._clock()
        with self._db.transaction() as conn:
            rows.require_live_account(conn, account.id, now)
            script = rows.require_script(conn, account.id, name)
            chosen = [self._require_version(conn, account, script, t.version_id) for t in targets]
            live = rows.live_deployment(conn, script.id)
            tags = deployment_tags(
                conn, script, chosen, live, annotations, force=force, triggered_by=triggered_by
            )
            return insert_deployment(conn, script, targets, source, now, tags, account.email)

    def discard_undeployed(self, account: Account, name: str, version_id: str) -> bool:
        """Delete a version no deployment ever used (its upload was refused after storing it),
        and the worker too if that leaves it without versions. True if it was deleted."""
        with self._db.transaction() as conn:
            script = rows.find_script(conn, account.id, name)
            if script is None:
                return False
            used = conn.execute(
                "SELECT 1 FROM deployment_versions WHERE version_id = ?", (version_id,)
            ).fetchone()
            if used:
                return False
            deleted = conn.execute(
                "DELETE FROM versions WHERE id = ? AND script_id = ?", (version_id, script.id)
            ).rowcount
            if not conn.execute(
                "SELECT 1 FROM versions WHERE script_id = ?", (script.id,)
            ).fetchone():
                conn.execute("DELETE FROM scripts WHERE id = ?", (script.id,))
            return bool(deleted)

    def delete(self, account: Account, name: str) -> list[str]:
        """Delete a worker with its versions, deployments and secrets; returns the version ids
        (whose written-out files the caller removes once nothing runs them)."""
        with self._db.transaction() as conn:
            script = rows.require_script(conn, account.id, name)
            versions = [
                r["id"]
                for r in conn.execute("SELECT id FROM versions WHERE script_id = ?", (script.id,))
            ]
            conn.execute("DELETE FROM scripts WHERE id = ?", (script.id,))
        return versions

    def set_subdomain(self, account: Account, name: str, enabled: bool, previews: bool) -> Script:
        with self._db.transaction() as conn:
            script = rows.require_script(conn, account.id, name)
            conn.execute(
                "UPDATE scripts SET subdomain_enabled = ?, previews_enabled = ? WHERE id = ?",
                (int(enabled), int(previews), script.id),
            )
            return rows.require_script(conn, account.id, name)

    def patch_settings(self, account: Account, name: str, patch: dict[str, object]) -> Script:
        with self._db.transaction() as conn:
            script = rows.require_script(conn, account.id, name)
            settings = {**script.settings, **patch}
            conn.execute(
                "UPDATE scripts SET settings = ? WHERE id = ?", (json.dumps(settings), script.id)
            )
            return rows.require_script(conn, account.id, name)


def check_script_name(name: str) -> None:
    import re

    if not re.fullmatch(r"[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?", name or ""):
        raise InvalidRequest(
            f"Worker name {name!r} is invalid: use lowercase letters, digits, '-' and '_', "
            f"1 to {MAX_SCRIPT_NAME} characters, starting and ending with a letter or digit"
        )


def _vars_and_secrets(version: Version, secrets: tuple[SecretValue, ...]) -> int:
    return sum(b.type in VAR_TYPES for b in version.bindings) + len(secrets)
