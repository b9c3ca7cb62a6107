"""Static assets of deployed versions: upload sessions, per-account files, each version's tree.

wrangler's protocol (cloudflare-api.md §7, workers-sdk deploy-helpers ``syncAssets``):

1. ``POST .../workers/scripts/{name}/assets-upload-session`` with ``{"manifest": {path: {hash,
   size}}}`` answers ``{"jwt", "buckets"}``: the hashes this account does not hold yet, in
   buckets; with none to upload, ``jwt`` is already the completion token.
2. ``POST .../workers/assets/upload?base64=true``, authorised by that ``jwt`` (not an API token),
   a multipart form of ``hash -> base64 content``; the upload that completes the session answers
   the completion token.
3. The script upload names it in ``metadata.assets.jwt`` (with ``metadata.assets.config``); the
   version stores the manifest's id and the config, so a rollback serves that version's files.

Files are stored once per account by hash (``accounts/<id>/assets/files/<hash>``), manifests
by their own digest (``.../assets/manifests/<digest>.json``, written when a script upload names
the session: until then it is the session's, in memory, so an abandoned session leaves nothing
on disk), and each version's tree of links (``versions/<id>/assets/<path>``) is made when its
modules are written out.

An account holds at most ``MAX_OPEN_SESSIONS`` sessions (a new one drops its oldest), and the
bytes its open sessions still expect count with its stored bytes against both bounds below:
300 sessions of 1,000 x 5 MiB files each passed alone (and each stayed an hour, its manifest
on disk for good).

What an account's asset files take of the shared disk is bounded twice over: a permanent
account's stored bytes by ``platform.accounts.max_stored_asset_bytes`` (``AssetBound``: checked
when a session starts, with the bytes it would add, and again at each upload, so two sessions
started side by side cannot pass it together), a temporary account's by the pool of all
temporary accounts (``temporary_total.py``, its asset bytes a running total: ``asset_pool.py``);
and the files and manifests that no kept version and no pending session uses are deleted
(``sweep``) when versions are pruned or a worker is deleted, not only with the account. A
session in progress references its whole manifest (the files it uploads and the ones the
account held already) until a version is stored from it.
A full disk (ENOSPC, EDQUOT) is ``StorageFull`` for the store "static asset files", with
nothing left behind, as for a version's own files (``asset_files.py``).

Tokens are random and kept in memory for an hour (a restart between upload and deploy asks for
the deploy again); the files of a session that never became a version go at the first sweep
after it ended. Hashes are the client's (wrangler's are BLAKE3 of the base64 text): each upload
is checked against the manifest's size, and an account's files are only ever served to that
account's own versions.
"""

from __future__ import annotations

import binascii
import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.runtime.deployments.asset_files import PART, AssetBound, AssetFiles
from ember.runtime.deployments.asset_manifest import (
    buckets,
    parse_config,
    parse_manifest,
    temporary_limits,
)
from ember.runtime.deployments.asset_session import (
    MAX_OPEN_SESSIONS,
    SESSION_TTL_S,
    Session,
    decode,
    new_token,
    scan,
)
from ember.runtime.deployments.asset_tables import SessionTables
from ember.runtime.deployments.asset_writes import AssetWrites
from ember.runtime.deployments.errors import InvalidRequest, InvalidUpload, Unauthenticated
from ember.storage import StorageHealth


@dataclass(frozen=True, slots=True)
class VersionAssets:
    """What a version stores about its assets (``metadata.assets`` once resolved)."""

    manifest_id: str
    config: dict[str, Any] = field(default_factory=dict)


def version_assets(version: Any) -> VersionAssets | None:
    """A stored version's assets (``metadata.assets`` as ``attach`` left it), if any."""
    stored = version.metadata.get("assets")
    if not isinstance(stored, dict) or not isinstance(stored.get("manifest"), str):
        return None
    config = stored.get("config")
    return VersionAssets(stored["manifest"], config if isinstance(config, dict) else {})


class AssetStore:
    """Upload sessions and the files of every account's assets."""

    def __init__(
        self,
        accounts_root: Path,
        clock: Callable[[], float],
        health: StorageHealth | None = None,
    ) -> None:
        self.files = AssetFiles(accounts_root, health or StorageHealth())
        self.clock = clock
        self.tables = SessionTables(clock)
        self.writes = AssetWrites(self.files, self.tables)
        self._lock = self.tables.lock  # the session tables
        self._uploads = self.tables.uploads
        self._completed = self.tables.completed
        # A temporary session's pool check and reservation (``start``), for all accounts.
        self._reserving = threading.Lock()

    # -- the protocol ---------------------------------------------------------------------------

    def start(
        self,
        account_id: str,
        body: object,
        *,
        temporary: bool = False,
        check: Callable[[int], None] | None = None,
        bound: AssetBound | None = None,
        current: Callable[[], bool] | None = None,
    ) -> dict[str, Any]:
        """An upload session for ``body`` (``{"manifest": ...}``): ``{jwt, buckets}``;
        a temporary account's manifest is held to 1,000 files of at most 5 MiB. ``check``:
        called with the bytes the session would add (it raises to refuse them), for a temporary
        account under a platform-wide lock (it must not wait on I/O: the pool is a running
        total); ``bound``: the account's most stored bytes, checked now and at each upload;
        ``current``: whether the account is still as the caller read it (not claimed or
        deleted since), asked under the account's lock, else Unauthenticated."""
        manifest = parse_manifest(body)
        if temporary:
            temporary_limits(manifest)
        text = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
        manifest_id = hashlib.sha256(text).hexdigest()[:32]
        tables = self.tables
        # Under the account's lock: a sweep never deletes a file this session found stored
        # (and so does not ask for) before the session is registered.
        with tables.held(account_id) as state, state.lock:
            # A claim ends the account's sessions and takes it out of the pool under this
            # lock: read before it, the account would be counted as temporary again.
            if state.gone or (current is not None and not current()):
                raise Unauthenticated(
                    "the account was claimed or deleted while this assets upload session "
                    "started: start it again with the account's current API token"
                )
            sizes: dict[str, int] = {}
            for entry in manifest.values():
                if not self.files.blob(account_id, entry["hash"]).is_file():
                    sizes[entry["hash"]] = entry["size"]
            with self._lock:
                tables.expire()
                dropped = tables.oldest(account_id)
                pending = tables.pending(account_id, skip=dropped)
                if temporary:
                    tables.mark_temporary(state)
            # What the account's other sessions still expect counts too: each alone passing
            # the bound, several together could pass it many times over.
            adding = sum(size for digest, size in sizes.items() if digest not in pending)
            if bound is not None:
                bound.check(self.writes.stored(account_id, state), adding, sum(pending.values()))
            if temporary:
                tables.pool.join(account_id, self.writes.stored(account_id, state))
            expires = self.clock() + SESSION_TTL_S
            session = Session(account_id, manifest_id, sizes, expires, text=text, bound=bound)
            # The pool is every temporary account's: its check and this session's reservation
            # in it are one step for the platform, or two accounts could pass it together.
            with self._reserving if temporary else contextlib.nullcontext():
                if check is not None:
                    check(adding)
                with self._lock:
                    session.serial = tables.next_serial()
                    for table in (self._uploads, self._completed):
                        tables.remove(table, dropped or "")
                    if not sizes:
                        return {"jwt": tables.complete(session), "buckets": []}
                    token = new_token()
                    tables.add(self._uploads, token, session)
        return {"jwt": token, "buckets": buckets(sizes)}

    def upload(self, account_id: str, token: str | None, files: dict[str, bytes]) -> str | None:
        """Store ``files`` (hash -> base64 text) for the session ``token`` names; the
        completion token once every file of the session is in, else None."""
        session = self.session(account_id, token)
        contents: dict[str, bytes] = {}
        for digest, encoded in files.items():
            size = session.sizes.get(digest)
            if size is None:
                if self.files.blob(account_id, digest).is_file():
                    continue  # sent twice (a retried bucket)
                raise InvalidRequest(f"asset {digest!r} is not one this upload session asked for")
            try:
                content = decode(encoded)
            except (binascii.Error, ValueError):
                raise InvalidRequest(f"asset {digest!r} is not valid base64") from None
            if len(content) != size:
                raise InvalidRequest(
                    f"asset {digest!r} is {len(content)} bytes; its manifest entry says {size}"
                )
            contents[digest] = content
        self.writes.store(account_id, session, contents)
        with self._lock:
            if self._uploads.get(token or "") is not session:
                # Dropped (a newer session, a claim) or expired while its files were written:
                # never completed after that (its files are left to the sweep).
                raise Unauthenticated("the assets upload session ended while its files were sent")
            for digest in files:
                session.sizes.pop(digest, None)
            self.tables.repend(account_id)
            if session.sizes:
                return None
            completion = session.completion or self.tables.complete(session)
            self.tables.remove(self._uploads, token or "")
            return completion

    def end_uploads(self, account_id: str) -> None:
        """Forget the account's open upload sessions (its owner changed: a claim). A completed
        one stays: a version is made from it only by a script upload, under an API token.
        Under the account's lock, as a session starts: one that read the account before the
        claim is either registered before this (and ended here) or sees the claim."""
        with self.tables.held(account_id) as state, state.lock, self._lock:
            for token in self.tables.tokens(account_id):
                self.tables.remove(self._uploads, token)

    def session(self, account_id: str, token: str | None) -> Session:
        """The upload session ``token`` names, else Unauthenticated."""
        with self._lock:
            self.tables.expire()
            session = self._uploads.get(token or "")
        if session is None or session.account_id != account_id:
            raise Unauthenticated(
                "the assets upload token is missing, expired, not this account's, or replaced: "
                f"an account holds at most {MAX_OPEN_SESSIONS} upload sessions, the oldest "
                "dropped for a new one"
            )
        return session

    def resolve(self, account_id: str, assets: object) -> VersionAssets:
        """``metadata.assets`` of a script upload (``{jwt, config}``) -> what the version keeps;
        the session stays referenced until ``settle``."""
        if not isinstance(assets, dict) or not isinstance(assets.get("jwt"), str):
            raise InvalidUpload(
                'metadata.assets must be {"jwt": <completion token>, "config": {...}}: upload '
                "the files first (assets-upload-session)"
            )
        # Under the account's lock, as the sweep runs: a token a stored version used already
        # may be reused, and a sweep deleting that version's manifest and files (pruned) must
        # either see this upload pending, or end the token with them before it is read here.
        with self.tables.held(account_id) as state, state.lock, self._lock:
            self.tables.expire()
            session = self._completed.get(assets["jwt"])
            if session is not None and session.account_id == account_id:
                session.resolving += 1
        if session is None or session.account_id != account_id:
            raise InvalidUpload(
                "metadata.assets.jwt is not a completed assets upload of this account (or it "
                "expired): upload the assets again"
            )
        try:
            config = parse_config(assets.get("config"))
            self.files.write(
                self.files.manifest_path(account_id, session.manifest_id), session.text
            )
        except BaseException:
            self.settle(account_id, {"assets": assets}, stored=False)
            raise
        return VersionAssets(session.manifest_id, config)

    def attach(self, account_id: str, extra: dict[str, Any], bindings: Any) -> dict[str, Any]:
        """``extra`` (an upload's other metadata) with ``assets`` resolved to what the version
        stores; an ``assets`` binding needs assets uploaded with it. The caller ``settle``s."""
        if "assets" not in extra:
            if any(b.get("type") == "assets" for b in bindings):
                raise InvalidUpload(
                    "an assets binding needs the version's assets: metadata.assets is missing"
                )
            return extra
        found = self.resolve(account_id, extra["assets"])
        return {**extra, "assets": {"manifest": found.manifest_id, "config": found.config}}

    def settle(self, account_id: str, extra: dict[str, Any], stored: bool) -> None:
        """A script upload that ``attach``ed ``extra`` (as sent) ended: ``stored`` if its
        version was stored, which from then on references the manifest itself."""
        assets = extra.get("assets")
        jwt = assets.get("jwt") if isinstance(assets, dict) else None
        with self._lock:
            session = self._completed.get(jwt) if isinstance(jwt, str) else None
            if session is None or session.account_id != account_id or not session.resolving:
                return
            session.resolving -= 1
            session.stored = session.stored or stored

    def temporary_bytes(self, ids: Callable[[], Iterable[str]]) -> int:
        """What every temporary account's asset files take and their open sessions still
        expect: the running total (``asset_pool.py``); ``ids`` lists the temporary accounts,
        called once, at the first count."""
        return self.tables.pool.total(ids, lambda account_id: scan(self.files.blobs(account_id)))

    def leave_pool(self, account_id: str) -> None:
        """The account was claimed: its assets no longer count in the temporary pool (under
        its lock, as ``end_uploads``)."""
        with self.tables.held(account_id) as state, state.lock, self._lock:
            self.tables.leave_pool(account_id)

    def forget(self, account_id: str) -> None:
        """The account was deleted (with its files): its sessions end, it leaves the pool, and
        an upload past its session's check writes nothing (``AssetWrites.store``); what one
        wrote after the account's folder was removed goes now."""
        with self.tables.held(account_id) as state, state.lock:
            state.gone = True
            with self._lock:
                for token in self.tables.tokens(account_id):
                    for table in (self._uploads, self._completed):
                        self.tables.remove(table, token)
                self.tables.leave_pool(account_id)
            self.files.remove(account_id)

    def stored_bytes(self, account_ids: list[str]) -> int:
        """``temporary_bytes`` recounted from the files and every session: the slow reference."""
        total = 0
        for account_id in account_ids:
            pending: dict[str, int] = {}
            with self._lock:
                for session in self._uploads.values():
                    if session.account_id == account_id:
                        pending.update(session.sizes)
            total += sum(pending.values()) + scan(self.files.blobs(account_id))
        return total

    # -- clean-up -------------------------------------------------------------------------------

    def sweep(self, account_id: str, kept: Callable[[], set[str]]) -> int:
        """Delete the account's manifests that neither a version (``kept``: the manifest ids
        its versions reference, read under the account's lock) nor a pending session uses, and
        then the files no remaining manifest lists. Returns the files deleted."""
        with self.tables.held(account_id) as state, state.lock:
            referenced = kept()
            with self._lock:
                self.tables.expire()
                sessions = map(self.tables.by_token, self.tables.tokens(account_id))
                pending = [s for s in sessions if s.resolving or not s.stored]
                referenced |= {s.manifest_id for s in pending}
            gone = set()
            for path in self.files.manifests(account_id):
                if path.name.endswith(".json") and path.stem not in referenced:
                    path.unlink(missing_ok=True)
                    gone.add(path.stem)
            with self._lock:  # a stored session's files may be gone: its token with them
                for token in self.tables.tokens(account_id):
                    found = self._completed.get(token)
                    if found is not None and found.manifest_id in gone:
                        self.tables.remove(self._completed, token)
            # Even with no manifest gone: a session that uploaded files and was dropped or
            # expired before any version named it wrote no manifest, and its files are listed
            # by nothing. A pending session's manifest is in memory (on disk only once resolved).
            used = {
                entry["hash"] for s in pending for entry in json.loads(s.text or b"{}").values()
            }
            for manifest_id in referenced:
                try:
                    listed = self.files.manifest(account_id, manifest_id).values()
                    used |= {entry["hash"] for entry in listed}
                except FileNotFoundError:
                    continue
            deleted = 0
            for path in self.files.blobs(account_id):
                # A part-written file is an upload's being written, or one a kill cut short
                # (it counted for good): with none of the account's writing, the latter.
                if path.name in used or (path.name.startswith(PART) and state.writing):
                    continue
                size = path.stat().st_size
                path.unlink(missing_ok=True)
                deleted += 1
                self.writes.add_stored(account_id, state, -size)
            return deleted
