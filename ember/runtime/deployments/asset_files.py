"""Static assets on disk: each account's files by hash and manifests by digest, written once,
and each version's tree of links to them; and the bound on what one account's files take.

``accounts/<id>/assets/files/<hash>`` and ``.../assets/manifests/<digest>.json`` live under the
account's directory, so deleting the account removes them with everything else. A write the
disk has no room for (ENOSPC, EDQUOT) leaves nothing behind and is raised as ``StorageFull``
for the store "static asset files", recorded in ``health`` until a write succeeds again, as a
version's own files are (``files.py``, ``ember/storage.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember.runtime.deployments.errors import QuotaExceeded
from ember.storage import StorageHealth, full_error, is_full

STORE = "static asset files"  # how the operator's log and /health name them
PART = ".part-"  # the prefix of a file being written (``_write_once``)


@dataclass(frozen=True, slots=True)
class AssetBound:
    """An account's most stored asset bytes (``max_stored_asset_bytes``) and, for the refusal,
    whom it applies to and how to get past it (``AccountLimits.scope`` / ``remedy``)."""

    max_bytes: int
    scope: str
    remedy: str

    def check(self, stored: int, adding: int, pending: int = 0) -> None:
        """``pending``: what the account's open upload sessions still expect (counted as
        stored, so that several sessions cannot each pass alone)."""
        total = stored + pending + adding
        if total <= self.max_bytes:
            return
        expected = f" and its open upload sessions expect {pending:,} more" if pending else ""
        raise QuotaExceeded(
            "stored_asset_bytes",
            total,
            self.max_bytes,
            f"This account stores {stored:,} bytes of static assets{expected}; these "
            f"{adding:,} bytes would make {total:,}, and {self.scope} may store at most "
            f"{self.max_bytes:,} bytes (max_stored_asset_bytes). Delete Workers or versions "
            "you no longer need (the files no kept version uses go with them), or "
            f"{self.remedy}.",
        )


class AssetFiles:
    """Where each account's asset files and manifests are, and writing them."""

    def __init__(self, accounts_root: Path, health: StorageHealth) -> None:
        self.root = accounts_root
        self.health = health

    def folder(self, account_id: str) -> Path:
        return self.root / account_id / "assets"

    def blob(self, account_id: str, digest: str) -> Path:
        return self.folder(account_id) / "files" / digest

    def manifest_path(self, account_id: str, manifest_id: str) -> Path:
        return self.folder(account_id) / "manifests" / f"{manifest_id}.json"

    def manifest(self, account_id: str, manifest_id: str) -> dict[str, dict[str, Any]]:
        return json.loads(self.manifest_path(account_id, manifest_id).read_text())

    def blobs(self, account_id: str) -> list[Path]:
        """The account's stored files (and any being written: ``PART``)."""
        return listing(self.folder(account_id) / "files")

    def manifests(self, account_id: str) -> list[Path]:
        return listing(self.folder(account_id) / "manifests")

    def remove(self, account_id: str) -> None:
        """Delete the account's asset files and manifests (it was deleted), and its folder
        if nothing else is left in it."""
        shutil.rmtree(self.folder(account_id), ignore_errors=True)
        with contextlib.suppress(OSError):  # not empty: the account's other files are not ours
            (self.root / account_id).rmdir()

    def remove_partial(self) -> int:
        """Delete every account's half-written files and manifests (``PART``: a write cut by a
        kill, which counted against the account's bound for good); only while nothing writes
        (``ember serve``'s start). Returns how many."""
        removed = 0
        for account in listing(self.root):
            for folder in ("files", "manifests"):
                for path in listing(account / "assets" / folder):
                    if path.name.startswith(PART):
                        path.unlink(missing_ok=True)
                        removed += 1
        return removed

    def write(self, path: Path, data: bytes) -> bool:
        """``path`` written once (True if this call wrote it); a full disk is ``StorageFull``."""
        return bool(self._guarded(_write_once, path, data))

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
                blob = self.blob(account_id, entry["hash"])
                try:
                    os.link(blob, out)
                except OSError:
                    self._guarded(shutil.copyfile, blob, out)
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.is_dir():
                raise
        return target

    def _guarded(self, write: Callable[..., Any], *args: Any) -> Any:
        """``write(*args)``; a full disk is ``StorageFull``, recorded in ``health``."""
        try:
            result = write(*args)
        except OSError as exc:
            if not is_full(exc):
                raise
            raise self.health.failed(full_error(STORE, self.root, exc)) from None
        self.health.wrote(STORE)
        return result


def listing(folder: Path) -> list[Path]:
    try:
        return [Path(entry.path) for entry in os.scandir(folder)]
    except FileNotFoundError:
        return []


def _write_once(path: Path, data: bytes) -> bool:
    """Write ``path`` atomically unless it exists (content-addressed: same name, same bytes);
    True if this call created it. Nothing is left behind when the write fails (a full disk)."""
    if path.is_file():
        return False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(prefix=PART, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        # A link, not a rename over it: of two writers of one name that both found it absent,
        # only the one that created it says so (with a rename both did, and both uploads
        # counted its bytes: the temporary pool's total drifted up until a restart).
        try:
            os.link(temp, path)
        except FileExistsError:
            return False
    finally:
        Path(temp).unlink(missing_ok=True)
    return True
