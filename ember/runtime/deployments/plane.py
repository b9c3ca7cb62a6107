"""The control plane: one object that owns the state and every service over it.

``ember serve``'s client/v4 API, ember's own CLI (through that API) and operator commands all go
through a ``ControlPlane``: one control plane, not a second copy.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ember.bindings.kv.async_store import AsyncKVStore
from ember.bindings.kv.service import STORE_FILE
from ember.bindings.kv.store import KVStore
from ember.runtime.deployments import pow
from ember.runtime.deployments.accounts import AccountService
from ember.runtime.deployments.asset_files import AssetBound
from ember.runtime.deployments.assets import AssetStore, version_assets
from ember.runtime.deployments.clock import Clock, system_clock
from ember.runtime.deployments.config import PlatformConfig
from ember.runtime.deployments.database import Database
from ember.runtime.deployments.errors import (
    ProofOfWorkRejected,
    QuotaExceeded,
    TemporaryAccountsRefused,
    VersionNotFound,
)
from ember.runtime.deployments.files import AccountFiles, MaterializedVersion
from ember.runtime.deployments.gc import GarbageCollector
from ember.runtime.deployments.kv_namespaces import NamespaceService
from ember.runtime.deployments.records import Account, Claimed, TemporaryAccount, Version
from ember.runtime.deployments.scripts import ScriptService
from ember.runtime.deployments.secrets import SecretService
from ember.runtime.deployments.tails import TailService
from ember.runtime.deployments.temporary_total import TemporaryTotal
from ember.storage import StorageFull, StorageHealth

DATABASE_FILE = "platform.db"
# Returns None when anonymous deploys may run, else the reason they may not (e.g. the sandbox's
# minimum layer set is missing). ``ember serve`` wires the sandbox probe in here.
AnonymousPolicy = Callable[[], str | None]


class ControlPlane:
    def __init__(
        self,
        state_dir: Path,
        config: PlatformConfig | None = None,
        *,
        clock: Clock = system_clock,
        kv_store: AsyncKVStore | None = None,
        anonymous_policy: AnonymousPolicy | None = None,
        storage: StorageHealth | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.config = config or PlatformConfig()
        self.clock = clock
        # One record of failing writes for every store of the state directory (/health).
        self.storage = storage or StorageHealth()
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.db = Database(state_dir / DATABASE_FILE, self.storage)
        self.files = AccountFiles(state_dir, self.storage)
        self.assets = AssetStore(self.files.root, clock, self.storage)
        self.accounts = AccountService(self.db, self.config, clock)
        # The KV store the workers' bindings use: ``ember serve`` passes the supervisor's own
        # (one connection, one writer thread); alone, the control plane opens the same file.
        self._owns_kv = kv_store is None
        self.kv = kv_store or AsyncKVStore(
            KVStore(state_dir / STORE_FILE, clock=clock, health=self.storage)
        )
        self.kv.store.health = self.storage  # the supervisor's store reports here too
        # What all temporary accounts store together, and its cap (temporary_total.py).
        self.temporary_total = TemporaryTotal(
            self.db,
            self.config,
            state_dir,
            self.kv.store.temporary_bytes,
            self._temporary_asset_bytes,
        )
        self.scripts = ScriptService(self.db, self.config, clock, self.temporary_total)
        self.secrets = SecretService(self.db, self.scripts, self.files, clock)
        self.namespaces = NamespaceService(self.db, self.config, clock, self.kv.store)
        self.tails = TailService(self.db, clock)
        self.gc = GarbageCollector(
            self.db, self.files, self.namespaces, clock, deleted=self.assets.forget
        )
        self.anonymous_policy = anonymous_policy
        # One thread compiles every version's _redirects/_headers, at its first asset request
        # (pure Python: several at once on the default executor stalled the serving loop).
        self.rule_compiles = ThreadPoolExecutor(max_workers=1, thread_name_prefix="asset-rules")
        self._signer = pow.ChallengeSigner(self.meta_secret("pow_key"))

    # -- temporary accounts ---------------------------------------------------------------------

    def issue_challenge(self) -> pow.Challenge:
        self._check_anonymous_allowed()
        cfg = self.config.proof_of_work
        return self._signer.issue(cfg.k, cfg.g, cfg.challenge_ttl_seconds, self.clock())

    def create_temporary_account(
        self, client: str, challenge_token: object, solution: object
    ) -> TemporaryAccount:
        """Verify the proof of work (a random sample of segments) and create the account."""
        self._check_anonymous_allowed()
        challenge = self._signer.open(challenge_token, self.clock())
        raw = pow.decode_solution(solution, challenge)
        seed = pow.b64url_decode(challenge.seed)
        if not pow.verify_sampled(
            seed, challenge.k, challenge.g, raw, self.config.proof_of_work.sample
        ):
            raise ProofOfWorkRejected(
                "the proof-of-work solution is wrong; solve the challenge "
                "again (SHA-256 chain, cloudflare-api.md §4.2)"
            )
        token_hash = hashlib.sha256(challenge.token.encode()).hexdigest()
        return self.accounts.create_temporary(client, token_hash, challenge.expires_at)

    def claim(self, claim_token: str, client: str) -> Claimed:
        """Make a temporary account permanent (``AccountService.claim``); its KV data leaves
        what temporary accounts store together (``temporary_total.py``)."""
        claimed = self.accounts.claim(claim_token, client)
        self.kv.store.set_account_temporary(claimed.account.id, False)
        # Uploads are authorised by their session's token, not the (now revoked) API token: the
        # agent that deployed must not go on storing files the new owner's manifests would trust.
        self.assets.end_uploads(claimed.account.id)
        self.assets.leave_pool(claimed.account.id)
        return claimed

    def _check_anonymous_allowed(self) -> None:
        reason = self.anonymous_policy() if self.anonymous_policy else None
        if reason:
            raise TemporaryAccountsRefused(
                f"this platform does not accept temporary (anonymous) deployments: {reason}"
            )

    def start_assets(self, account: Account, body: object) -> dict[str, Any]:
        """An assets upload session (``_start_assets``). Refused for a bound, it is tried once
        more after the account's unused files are deleted (``sweep_assets``): those of an
        upload no version ever named (its deploy died) otherwise counted for good, and with no
        version to prune the account could never start a session again."""
        try:
            return self._start_assets(account, body)
        except QuotaExceeded:
            if not self.sweep_assets(account.id):
                raise
            return self._start_assets(account, body)

    def _start_assets(self, account: Account, body: object) -> dict[str, Any]:
        """An assets upload session (``AssetStore.start``); a temporary account's new files
        count in what all temporary accounts store (``temporary_total.py``). ``account`` was
        read when the request was authenticated: the start asks again under the account's
        lock, so that a claim or deletion since refuses it."""

        def current() -> bool:
            with self.db.reader() as conn:
                row = conn.execute(
                    "SELECT kind, deleted_at FROM accounts WHERE id = ?", (account.id,)
                ).fetchone()
            return row is not None and row["deleted_at"] is None and row["kind"] == account.kind

        if not account.temporary:
            limits = self.config.limits_for(temporary=False)
            bound = None
            if limits.max_stored_asset_bytes is not None:
                remedy = limits.remedy("max_stored_asset_bytes")
                bound = AssetBound(limits.max_stored_asset_bytes, limits.scope, remedy)
            return self.assets.start(account.id, body, bound=bound, current=current)
        limits = self.config.limits_for(temporary=True)
        # Read here, not in ``check``: it runs under the platform-wide lock of the pool's
        # check and reservation, which waits on no I/O. The first count lists the accounts.
        others = self.temporary_total.others()
        self._temporary_asset_bytes()

        def check(adding: int) -> None:
            stored = self._temporary_asset_bytes()  # the running total: in memory
            self.temporary_total.check_assets(stored, adding, limits, others)

        return self.assets.start(account.id, body, temporary=True, check=check, current=current)

    def _temporary_asset_bytes(self, conn: sqlite3.Connection | None = None) -> int:
        """Every temporary account's asset files and what their open sessions still expect
        (a running total: the accounts are listed once, at the first count); ``conn``: the
        caller's, inside its transaction (a version being stored)."""
        query = "SELECT id FROM accounts WHERE kind = 'temporary' AND deleted_at IS NULL"

        def ids() -> list[str]:
            if conn is not None:
                return [str(row[0]) for row in conn.execute(query)]
            with self.db.reader() as reader:
                return [str(row[0]) for row in reader.execute(query)]

        return self.assets.temporary_bytes(ids)

    def sweep_assets(self, account_id: str) -> int:
        """Delete the account's asset files and manifests that no remaining version and no
        pending upload session uses (``AssetStore.sweep``); after versions were pruned or a
        worker deleted. Returns the files deleted."""

        def kept() -> set[str]:
            with self.db.reader() as conn:
                return {
                    str(row[0])
                    for row in conn.execute(
                        "SELECT json_extract(v.metadata, '$.assets.manifest') FROM versions v "
                        "JOIN scripts s ON s.id = v.script_id WHERE s.account_id = ? "
                        "AND json_extract(v.metadata, '$.assets.manifest') IS NOT NULL",
                        (account_id,),
                    )
                }

        return self.assets.sweep(account_id, kept)

    # -- runtime side ---------------------------------------------------------------------------

    def materialize(self, account_id: str, version: Version) -> MaterializedVersion:
        """Write a version's modules to disk for an isolate (idempotent). VersionNotFound when
        the version has no modules left (pruned or deleted since it was read): an empty folder
        would be an orphan, and an isolate failing on a missing main module."""
        modules = self.scripts.modules(version.id)
        if not modules and (version.main_module or version_assets(version) is None):
            raise VersionNotFound(version.id, self._script_name(version.script_id))
        files = self.files.materialize(account_id, version.id, version.main_module, modules)
        stored = version_assets(version)
        if stored is not None:
            self.assets.files.materialize(account_id, stored.manifest_id, files.root / "assets")
        return files

    def _script_name(self, script_id: str) -> str:
        with self.db.reader() as conn:
            row = conn.execute("SELECT name FROM scripts WHERE id = ?", (script_id,)).fetchone()
        return str(row["name"]) if row else script_id

    def prepare_storage(
        self, compact: bool = False, say: Callable[[str], None] | None = None
    ) -> list[str]:
        """Before serving: switch files made by an older ember to incremental auto-vacuum (one
        ``VACUUM`` each, once), or with ``compact`` rewrite both files (``ember serve
        --compact``). Returns a line per file rewritten, for the operator; ``say`` gets a line
        as each rewrite starts (a large file takes a while, and serve is not listening yet).
        Half-written asset files a kill left are deleted here too: nothing uploads yet, and
        listing two folders per account is not work for the event loop."""
        notes = []
        partial = self.assets.files.remove_partial()
        if partial:
            notes.append(f"[ember] removed {partial} half-written asset file(s) a crash left")
        for name, store in (("control-plane database", self.db), ("KV store", self.kv.store)):

            def starting(name: str = name, path: Path = store.path) -> None:
                if say is not None:
                    size = path.stat().st_size if path.exists() else 0
                    say(
                        f"[ember] rewriting the {name} ({path}, {size / 2**20:,.1f} MiB) once "
                        "before serving: it needs about twice that free"
                    )

            try:
                if compact:
                    starting()
                    store.compact()
                    notes.append(f"[ember] compacted the {name} ({store.path}) before serving")
                elif store.switch_to_incremental_vacuum(before=starting):
                    notes.append(
                        f"[ember] the {name} ({store.path}) now frees deleted data in small "
                        "steps (auto_vacuum=INCREMENTAL): rewritten once, at this start"
                    )
            except StorageFull as exc:
                # The rewrite is a copy of the file: without room for it, serve as before (the
                # pages of deleted data are reused, the file does not shrink) rather than not
                # at all, and try again at the next start.
                notes.append(
                    f"[ember] warning: could not rewrite the {name} ({store.path}): {exc.cause}. "
                    "Serving without it: deleted data's space is reused but the file does not "
                    "shrink; free some space and restart ember serve to try again"
                )
        return notes

    def close(self) -> None:
        self.rule_compiles.shutdown(wait=False, cancel_futures=True)
        self.db.close()
        if self._owns_kv:
            self.kv.close()

    def meta_secret(self, key: str) -> bytes:
        """The platform's secret named ``key`` (32 random bytes made at first use, then kept in
        its state: the same after a restart)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT value FROM platform_meta WHERE key = ?", (key,)).fetchone()
            if row is not None:
                return bytes(row["value"])
            value = secrets.token_bytes(32)
            conn.execute("INSERT INTO platform_meta VALUES (?, ?)", (key, value))
            return value
