"""Per-account files on disk: versions written out as directories the runtime can import from.

The database is the source of truth for modules; a version's directory is derived from it and
can be rebuilt any time. Everything of an account lives under ``accounts/<account id>/`` so that
deleting the account (GC) removes all of its files with one ``rmtree``.
A write-out the disk has no room for (ENOSPC, EDQUOT) leaves nothing behind and is raised as
``StorageFull``, recorded in ``health`` (``ember/storage.py``) until a write-out succeeds.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ember.runtime.deployments.records import Module
from ember.runtime.deployments.upload import check_module_name
from ember.storage import StorageHealth, full_error, is_full

PYTHON_MODULES = "python_modules"
STORE = "worker files"  # how the operator's log and /health name them


@dataclass(frozen=True)
class MaterializedVersion:
    """A version written out: the module root, what goes on sys.path, and the entry module."""

    root: Path
    import_paths: tuple[Path, ...]
    main_module: Path


class AccountFiles:
    def __init__(self, state_dir: Path, health: StorageHealth | None = None) -> None:
        self.health = health or StorageHealth()
        self.root = state_dir / "accounts"
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)

    def account_dir(self, account_id: str) -> Path:
        return self.root / account_id

    def materialize(
        self, account_id: str, version_id: str, main_module: str, modules: tuple[Module, ...]
    ) -> MaterializedVersion:
        """Write a version's modules once (atomically: a temp dir renamed into place).

        ``python_modules/`` goes on the import path whatever the content type its files were
        uploaded with (wrangler sends vendored ``.py`` files as application/octet-stream).
        """
        target = self.account_dir(account_id) / "versions" / version_id
        modules_dir = target / "modules"
        if not target.exists():
            try:
                self._write_out(target, modules)
            except OSError as exc:
                if not is_full(exc):
                    raise
                raise self.health.failed(full_error(STORE, self.root, exc)) from None
            self.health.wrote(STORE)
        import_paths = [modules_dir]
        if (modules_dir / PYTHON_MODULES).is_dir():
            import_paths.append(modules_dir / PYTHON_MODULES)
        return MaterializedVersion(target, tuple(import_paths), modules_dir / main_module)

    def _write_out(self, target: Path, modules: tuple[Module, ...]) -> None:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
        try:
            for module in modules:
                check_module_name(module.name)
                path = staging / "modules" / module.name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(module.content)
            (staging / "modules").mkdir(exist_ok=True)
        except BaseException:  # never leave a half-written copy behind (disk is shared)
            shutil.rmtree(staging, ignore_errors=True)
            raise
        try:
            os.rename(staging, target)
        except OSError:  # another caller won the race; theirs is identical
            shutil.rmtree(staging, ignore_errors=True)

    def remove_version(self, account_id: str, version_id: str) -> None:
        """Remove a version's written-out files (the version was deleted)."""
        check_module_name(version_id)  # an id, never a path that leaves the account's directory
        shutil.rmtree(self.account_dir(account_id) / "versions" / version_id, ignore_errors=True)

    def version_entries(self) -> list[tuple[str, str]]:
        """(account id, entry name) of everything under each account's ``versions/``: version
        directories, and staging directories of write-outs in progress or cut short."""
        return [
            (account.name, entry.name)
            for account in sorted(self.root.iterdir())
            if (account / "versions").is_dir()
            for entry in sorted((account / "versions").iterdir())
        ]

    def remove_account(self, account_id: str) -> None:
        shutil.rmtree(self.account_dir(account_id), ignore_errors=True)
