"""Files half-written by an upload that never finished (``.part-``: ember serve was killed
mid-write) are deleted by the account's sweep, and stop counting against its bound; never one
an upload of the account is writing now."""

from __future__ import annotations

import base64
from pathlib import Path

from ember.runtime.deployments.asset_files import AssetBound
from ember.runtime.deployments.assets import AssetStore
from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.plane import ControlPlane


def test_the_sweep_deletes_part_files_no_upload_is_writing(tmp_path: Path) -> None:
    store = AssetStore(tmp_path / "accounts", ManualClock(1000.0))
    files = store.files.folder("a") / "files"
    files.mkdir(parents=True)
    (files / ".part-old").write_bytes(b"x" * 900)  # a killed upload's
    manifest = {"manifest": {"/a.txt": {"hash": "a" * 32, "size": 3}}}
    token = store.start("a", manifest)["jwt"]
    write = store.files.write
    during: list[list[str]] = []

    def swept_meanwhile(path: Path, data: bytes) -> bool:
        (files / ".part-now").write_bytes(b"yy")  # as _write_once's own, before its rename
        store.sweep("a", kept=set)  # a prune on another thread, mid-write
        during.append(sorted(p.name for p in files.iterdir()))
        (files / ".part-now").unlink()
        return write(path, data)

    store.files.write = swept_meanwhile  # type: ignore[method-assign]
    assert store.upload("a", token, {"a" * 32: base64.b64encode(b"abc")}) is not None
    store.files.write = write  # type: ignore[method-assign]
    assert during == [[".part-now", ".part-old"]]  # nothing went while the account wrote
    assert store.sweep("a", kept=set) == 1  # the session's file stays: no version named it yet
    assert sorted(p.name for p in files.iterdir()) == ["a" * 32]
    # The 900 bytes no longer count against the bound.
    store.start("a", {"manifest": {"/b": {"hash": "b" * 32, "size": 990}}}, bound=_bound())


def test_part_files_are_removed_at_start(tmp_path: Path) -> None:
    store = AssetStore(tmp_path / "accounts", ManualClock(1000.0))
    for account in ("a", "b"):
        for folder in ("files", "manifests"):
            where = store.files.folder(account) / folder
            where.mkdir(parents=True)
            (where / ".part-x").write_bytes(b"x")
            (where / "kept.json").write_bytes(b"{}")
    assert store.files.remove_partial() == 4
    assert sorted(p.name for p in store.files.root.glob("*/assets/*/*")) == ["kept.json"] * 4


def test_preparing_the_storage_removes_part_files(tmp_path: Path) -> None:
    """``ember serve`` removed them on the event loop (a listing of two folders per account);
    ``prepare_storage`` runs before serving on a thread of its own, and says so."""
    plane = ControlPlane(tmp_path / "state", clock=ManualClock(1000.0))
    try:
        where = plane.assets.files.folder("a") / "files"
        where.mkdir(parents=True)
        (where / ".part-x").write_bytes(b"x")
        (where / "kept").write_bytes(b"x")
        notes = plane.prepare_storage()
        assert [p.name for p in where.iterdir()] == ["kept"]
        assert any("removed 1 half-written asset file(s)" in note for note in notes), notes
        assert plane.prepare_storage() == []
    finally:
        plane.close()


def _bound() -> AssetBound:
    return AssetBound(1000, "this account", "ask")
