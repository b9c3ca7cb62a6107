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
by their own digest (``.../assets/manifests/<digest>.json``), and each version's tree of links
(``versions/<id>/assets/<path>``) is made when its modules are written out; deleting the
account removes them all. Tokens are random and kept in memory for an hour (a restart between
upload and deploy asks for the deploy again). Hashes are the client's (wrangler's are BLAKE3 of
the base64 text): each upload is checked against the manifest's size, and an account's files
are only ever served to that account's own versions.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.bindings.assets.files import MAX_ASSET_COUNT, MAX_ASSET_SIZE, safe_relative
from ember.config_assets import HTML_HANDLING, NOT_FOUND_HANDLING, routing_rules
from ember.errors import ConfigError
from ember.runtime.deployments.errors import InvalidRequest, InvalidUpload, Unauthenticated

SESSION_TTL_S = 3600.0
# A temporary account's assets, as Cloudflare bounds a temporary (unclaimed) account's.
TEMPORARY_MAX_FILES = 1_000
TEMPORARY_MAX_FILE_BYTES = 5 * 1024 * 1024
BUCKET_FILES = 50
BUCKET_BYTES = 40 * 1024 * 1024  # of file content per upload request (before base64)
_HASH = re.compile(r"^[0-9a-f]{32}$")
ASSET_CONFIG_KEYS = ("html_handling", "not_found_handling", "run_worker_first")


@dataclass
class _Session:
    account_id: str
    manifest_id: str
    sizes: dict[str, int]  # hash -> size, of the files still to upload
    expires: float
    completion: str | None = None


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

    def __init__(self, accounts_root: Path, clock: Callable[[], float]) -> None:
        self.root = accounts_root
        self.clock = clock
        self._lock = threading.Lock()
        self._uploads: dict[str, _Session] = {}  # upload token -> session
        self._completed: dict[str, _Session] = {}  # completion token -> session

    # -- paths ----------------------------------------------------------------------------------

    def _dir(self, account_id: str) -> Path:
        return self.root / account_id / "assets"

    def _blob(self, account_id: str, digest: str) -> Path:
        return self._dir(account_id) / "files" / digest

    def manifest_path(self, account_id: str, manifest_id: str) -> Path:
        return self._dir(account_id) / "manifests" / f"{manifest_id}.json"

    # -- the protocol ---------------------------------------------------------------------------

    def start(
        self,
        account_id: str,
        body: object,
        *,
        temporary: bool = False,
        check: Callable[[int], None] | None = None,
    ) -> dict[str, Any]:
        """An upload session for ``body`` (``{"manifest": ...}``): ``{jwt, buckets}``;
        a temporary account's manifest is held to 1,000 files of at most 5 MiB. ``check``:
        called with the bytes the session would add (it raises to refuse them)."""
        manifest = _manifest(body)
        if temporary:
            _temporary_limits(manifest)
        text = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
        manifest_id = hashlib.sha256(text).hexdigest()[:32]
        _write_once(self.manifest_path(account_id, manifest_id), text)
        sizes: dict[str, int] = {}
        for entry in manifest.values():
            if not self._blob(account_id, entry["hash"]).is_file():
                sizes[entry["hash"]] = entry["size"]
        if check is not None:
            check(sum(sizes.values()))
        session = _Session(account_id, manifest_id, sizes, self.clock() + SESSION_TTL_S)
        with self._lock:
            self._expire()
            if not sizes:
                return {"jwt": self._complete(session), "buckets": []}
            token = _token()
            self._uploads[token] = session
        return {"jwt": token, "buckets": _buckets(sizes)}

    def upload(self, account_id: str, token: str | None, files: dict[str, bytes]) -> str | None:
        """Store ``files`` (hash -> base64 text) for the session ``token`` names; the
        completion token once every file of the session is in, else None."""
        with self._lock:
            self._expire()
            session = self._uploads.get(token or "")
        if session is None or session.account_id != account_id:
            raise Unauthenticated(
                "the assets upload token is missing, expired or not this account's"
            )
        for digest, encoded in files.items():
            size = session.sizes.get(digest)
            if size is None:
                if self._blob(account_id, digest).is_file():
                    continue  # sent twice (a retried bucket)
                raise InvalidRequest(f"asset {digest!r} is not one this upload session asked for")
            try:
                content = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidRequest(f"asset {digest!r} is not valid base64") from None
            if len(content) != size:
                raise InvalidRequest(
                    f"asset {digest!r} is {len(content)} bytes; its manifest entry says {size}"
                )
            _write_once(self._blob(account_id, digest), content)
        with self._lock:
            for digest in files:
                session.sizes.pop(digest, None)
            if session.sizes:
                return None
            self._uploads.pop(token or "", None)
            return session.completion or self._complete(session)

    def resolve(self, account_id: str, assets: object) -> VersionAssets:
        """``metadata.assets`` of a script upload (``{jwt, config}``) -> what the version keeps."""
        if not isinstance(assets, dict) or not isinstance(assets.get("jwt"), str):
            raise InvalidUpload(
                'metadata.assets must be {"jwt": <completion token>, "config": {...}}: upload '
                "the files first (assets-upload-session)"
            )
        with self._lock:
            self._expire()
            session = self._completed.get(assets["jwt"])
        if session is None or session.account_id != account_id:
            raise InvalidUpload(
                "metadata.assets.jwt is not a completed assets upload of this account (or it "
                "expired): upload the assets again"
            )
        return VersionAssets(session.manifest_id, _config(assets.get("config")))

    def attach(self, account_id: str, extra: dict[str, Any], bindings: Any) -> dict[str, Any]:
        """``extra`` (an upload's other metadata) with ``assets`` resolved to what the version
        stores; an ``assets`` binding needs assets uploaded with it."""
        if "assets" not in extra:
            if any(b.get("type") == "assets" for b in bindings):
                raise InvalidUpload(
                    "an assets binding needs the version's assets: metadata.assets is missing"
                )
            return extra
        found = self.resolve(account_id, extra["assets"])
        return {**extra, "assets": {"manifest": found.manifest_id, "config": found.config}}

    def stored_bytes(self, account_ids: list[str]) -> int:
        """The bytes of the asset files these accounts store."""
        total = 0
        for account_id in account_ids:
            try:
                entries = list(os.scandir(self._dir(account_id) / "files"))
            except OSError:
                continue
            for entry in entries:
                try:
                    total += entry.stat().st_size
                except OSError:
                    continue
        return total

    # -- serving --------------------------------------------------------------------------------

    def manifest(self, account_id: str, manifest_id: str) -> dict[str, dict[str, Any]]:
        return json.loads(self.manifest_path(account_id, manifest_id).read_text())

    def materialize(self, account_id: str, manifest_id: str, target: Path) -> Path:
        """The version's asset tree under ``target`` (made once, atomically): each file a link
        to (or, across file systems, a copy of) the account's stored file."""
        if target.is_dir():
            return target
        manifest = self.manifest(account_id, manifest_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".assets-", dir=target.parent))
        try:
            for path, entry in manifest.items():
                out = staging / path.lstrip("/")
                out.parent.mkdir(parents=True, exist_ok=True)
                blob = self._blob(account_id, entry["hash"])
                try:
                    os.link(blob, out)
                except OSError:
                    shutil.copyfile(blob, out)
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.is_dir():
                raise
        return target

    # -- internals ------------------------------------------------------------------------------

    def _complete(self, session: _Session) -> str:
        token = _token()
        session.completion = token
        self._completed[token] = session
        return token

    def _expire(self) -> None:
        now = self.clock()
        for table in (self._uploads, self._completed):
            for token in [t for t, s in table.items() if s.expires < now]:
                del table[token]


def _token() -> str:
    return secrets.token_urlsafe(32)


def _manifest(body: object) -> dict[str, dict[str, Any]]:
    manifest = body.get("manifest") if isinstance(body, dict) else None
    if not isinstance(manifest, dict):
        raise InvalidRequest('expected {"manifest": {"/path": {"hash": "...", "size": N}}}')
    if len(manifest) > MAX_ASSET_COUNT:
        raise InvalidRequest(
            f"the manifest has {len(manifest):,} files; at most {MAX_ASSET_COUNT:,}"
        )
    out: dict[str, dict[str, Any]] = {}
    for path, entry in manifest.items():
        relative = safe_relative(path) if isinstance(path, str) else None
        if not relative or relative.endswith("/") or "//" in path or len(path) > 1024:
            raise InvalidRequest(
                f"manifest path {str(path)[:80]!r} is not a file path such as /a.txt"
            )
        if not isinstance(entry, dict):
            raise InvalidRequest(f"manifest entry {path!r} must be {{hash, size}}")
        digest, size = entry.get("hash"), entry.get("size")
        if not isinstance(digest, str) or not _HASH.match(digest):
            raise InvalidRequest(f"manifest entry {path!r}: hash must be 32 hex digits")
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_ASSET_SIZE:
            raise InvalidRequest(
                f"manifest entry {path!r}: size must be 0 to {MAX_ASSET_SIZE} bytes (25 MiB)"
            )
        out[path] = {"hash": digest, "size": size}
    _check_tree(out)
    return out


def _temporary_limits(manifest: dict[str, dict[str, Any]]) -> None:
    if len(manifest) > TEMPORARY_MAX_FILES:
        raise InvalidRequest(
            f"the manifest has {len(manifest):,} files; a temporary account's assets are at "
            f"most {TEMPORARY_MAX_FILES:,} files (claim the account for more)"
        )
    for path, entry in manifest.items():
        if entry["size"] > TEMPORARY_MAX_FILE_BYTES:
            raise InvalidRequest(
                f"asset {path!r} is {entry['size']:,} bytes; a temporary account's assets are "
                f"at most {TEMPORARY_MAX_FILE_BYTES:,} bytes (5 MiB) each"
            )


def _check_tree(manifest: dict[str, dict[str, Any]]) -> None:
    """A path cannot be a file and a directory at once (``/a`` and ``/a/b``)."""
    for path in manifest:
        parts = path.split("/")
        for depth in range(2, len(parts)):
            if "/".join(parts[:depth]) in manifest:
                raise InvalidRequest(
                    f"manifest path {path!r} is under the file {'/'.join(parts[:depth])!r}"
                )


def _config(config: object) -> dict[str, Any]:
    """``metadata.assets.config`` checked as ember dev checks the ``assets`` key."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise InvalidUpload("metadata.assets.config must be an object")
    out = {k: config[k] for k in ASSET_CONFIG_KEYS if config.get(k) is not None}
    for key, allowed in (
        ("html_handling", HTML_HANDLING),
        ("not_found_handling", NOT_FOUND_HANDLING),
    ):
        if key in out and out[key] not in allowed:
            raise InvalidUpload(
                f"metadata.assets.config.{key} is {out[key]!r}; expected one of "
                + ", ".join(allowed)
            )
    first = out.get("run_worker_first")
    if first is not None and not isinstance(first, bool):
        if not isinstance(first, list) or not all(isinstance(r, str) for r in first):
            raise InvalidUpload("metadata.assets.config.run_worker_first must be a bool or rules")
        try:
            routing_rules(first, "metadata", "assets.config.run_worker_first")
        except ConfigError as exc:
            raise InvalidUpload(str(exc)) from None
    return out


def _buckets(sizes: dict[str, int]) -> list[list[str]]:
    buckets: list[list[str]] = []
    current: list[str] = []
    total = 0
    for digest, size in sorted(sizes.items()):
        if current and (len(current) >= BUCKET_FILES or total + size > BUCKET_BYTES):
            buckets.append(current)
            current, total = [], 0
        current.append(digest)
        total += size
    if current:
        buckets.append(current)
    return buckets


def _write_once(path: Path, data: bytes) -> None:
    """Write ``path`` atomically unless it exists (content-addressed: same name, same bytes)."""
    if path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(prefix=".part-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
