"""Upload sessions an account may hold open: a few per account (the oldest dropped), the bytes
they still expect counted against the account's bound and the temporary pool, and no manifest
on disk until a version uses it."""

from __future__ import annotations

import base64
import threading
from pathlib import Path

import pytest

from ember.runtime.deployments.asset_files import AssetBound
from ember.runtime.deployments.assets import MAX_OPEN_SESSIONS, AssetStore, VersionAssets
from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.errors import InvalidUpload, QuotaExceeded, Unauthenticated


def _manifest(seed: int, size: int = 10) -> dict[str, object]:
    return {"manifest": {f"/f{seed}.txt": {"hash": f"{seed:032x}", "size": size}}}


@pytest.fixture
def store(tmp_path: Path) -> AssetStore:
    return AssetStore(tmp_path / "accounts", ManualClock(1000.0))


def test_an_account_holds_a_few_open_sessions_the_oldest_dropped(store: AssetStore) -> None:
    tokens = [store.start("a", _manifest(i))["jwt"] for i in range(MAX_OPEN_SESSIONS + 1)]
    with pytest.raises(Unauthenticated, match="at most 8"):
        store.session("a", tokens[0])
    for token in tokens[1:]:
        store.session("a", token)
    # another account's sessions are its own
    store.start("b", _manifest(99))
    store.session("a", tokens[1])


def test_pending_sessions_count_against_the_bound(store: AssetStore) -> None:
    bound = AssetBound(1000, "this account", "ask")
    store.start("a", _manifest(1, 600), bound=bound)
    with pytest.raises(QuotaExceeded, match="max_stored_asset_bytes") as refused:
        store.start("a", _manifest(2, 600), bound=bound)
    assert "open upload sessions expect 600 more" in str(refused.value)
    # the same files in a second session are expected once
    store.start("a", _manifest(1, 600), bound=bound)


def test_pending_sessions_count_in_the_temporary_pool(store: AssetStore) -> None:
    def check(adding: int) -> None:
        AssetBound(1000, "temporary accounts", "claim").check(
            store.stored_bytes(["t1", "t2"]), adding
        )

    store.start("t1", _manifest(1, 600), temporary=True, check=check)
    with pytest.raises(QuotaExceeded):
        store.start("t2", _manifest(2, 600), temporary=True, check=check)


def test_a_manifest_is_written_only_when_a_version_uses_it(store: AssetStore) -> None:
    jwt = store.start("a", _manifest(1, 3))["jwt"]
    manifests = store.files.folder("a") / "manifests"
    assert not manifests.exists() or not list(manifests.iterdir())
    completion = store.upload("a", jwt, {f"{1:032x}": base64.b64encode(b"abc")})
    assert completion is not None
    assert not manifests.exists() or not list(manifests.iterdir())
    found = store.resolve("a", {"jwt": completion})
    assert store.files.manifest("a", found.manifest_id) == {
        "/f1.txt": {"hash": f"{1:032x}", "size": 3}
    }
    store.settle("a", {"assets": {"jwt": completion}}, stored=True)


def test_a_session_ended_while_its_files_are_written_is_not_completed(store: AssetStore) -> None:
    """An upload already past its token check when a claim (or a newer session) ends its
    session must not put the session back, completed, with a usable completion token."""
    manifest = {"manifest": {"/a.txt": {"hash": "a" * 32, "size": 3}}}
    token = store.start("a", manifest)["jwt"]
    write = store.writes.store

    def ended_meanwhile(*args: object) -> None:
        store.end_uploads("a")  # as a claim does, from another thread, mid-write
        write(*args)  # type: ignore[arg-type]

    store.writes.store = ended_meanwhile  # type: ignore[method-assign]
    with pytest.raises(Unauthenticated, match="ended"):
        store.upload("a", token, {"a" * 32: base64.b64encode(b"abc")})


def test_a_session_being_resolved_outlives_its_hour(store: AssetStore) -> None:
    """A script upload that resolved a completion token near its hour keeps the session (its
    manifest and files referenced) until it settles: expired under it, a sweep in between
    deleted the version's files."""
    clock = store.clock
    manifest = {"manifest": {"/a.txt": {"hash": "a" * 32, "size": 3}}}
    token = store.start("a", manifest)["jwt"]
    completion = store.upload("a", token, {"a" * 32: base64.b64encode(b"abc")})
    assert completion is not None
    store.resolve("a", {"jwt": completion})
    clock.advance(2 * 3600)  # type: ignore[attr-defined]
    assert store.sweep("a", kept=set) == 0  # the version being stored still needs its file
    store.settle("a", {"assets": {"jwt": completion}}, stored=False)
    assert store.sweep("a", kept=set) == 1  # settled and expired: now it goes


def test_a_reused_completion_token_never_resolves_files_a_sweep_deletes(
    store: AssetStore,
) -> None:
    """A completion token a stored version used already, resolved again by a script upload
    while a prune's sweep (its version gone) deletes the manifest and files: the resolve took
    no lock, and the new version named files that were gone. It waits for the sweep, and then
    finds the token gone with them, or resolves before the sweep reads what is pending."""
    manifest = {"manifest": {"/a.txt": {"hash": "a" * 32, "size": 3}}}
    token = store.start("a", manifest)["jwt"]
    completion = store.upload("a", token, {"a" * 32: base64.b64encode(b"abc")})
    assert completion is not None
    store.resolve("a", {"jwt": completion})
    store.settle("a", {"assets": {"jwt": completion}}, stored=True)  # version 1 stored
    listing = store.files.manifests
    outcome: list[object] = []

    def resolve_again() -> None:
        try:
            outcome.append(store.resolve("a", {"jwt": completion}))
        except InvalidUpload as exc:
            outcome.append(exc)

    def resolved_meanwhile(account_id: str) -> list[Path]:
        # A script upload on another thread, after the sweep read what is pending.
        other = threading.Thread(target=resolve_again)
        other.start()
        other.join(timeout=1.0)
        threads.append(other)
        return listing(account_id)

    threads: list[threading.Thread] = []
    store.files.manifests = resolved_meanwhile  # type: ignore[method-assign]
    store.sweep("a", kept=set)  # version 1 was pruned
    threads[0].join()
    if isinstance(outcome[0], InvalidUpload):
        return  # the token went with its files: the upload is told to send them again
    found = outcome[0]
    assert isinstance(found, VersionAssets)
    assert store.files.manifest_path("a", found.manifest_id).is_file()
    for entry in store.files.manifest("a", found.manifest_id).values():
        assert store.files.blob("a", entry["hash"]).is_file()


@pytest.mark.parametrize("deleted", ["before the write", "after the write", "after the upload"])
def test_an_upload_racing_its_accounts_deletion_leaves_no_file(
    store: AssetStore, deleted: str
) -> None:
    """The account is deleted (its folder removed, then ``forget``) while an upload it started
    before writes its files: they stayed under the deleted account's folder for good."""
    store.temporary_bytes(lambda: ["t"])  # the pool counts the account
    jwt = store.start("t", _manifest(1), temporary=True)["jwt"]
    write = store.files.write

    def racing(path: Path, data: bytes) -> bool:
        if deleted == "before the write":
            store.forget("t")
        written = write(path, data)
        if deleted == "after the write":
            store.forget("t")
        return written

    store.files.write = racing  # type: ignore[method-assign]
    files = {f"{1:032x}": base64.b64encode(b"x" * 10)}
    if deleted == "after the upload":
        store.upload("t", jwt, files)
        store.forget("t")
    else:
        with pytest.raises(Unauthenticated):
            store.upload("t", jwt, files)
    assert not (store.files.root / "t").exists()
    assert store.temporary_bytes(lambda: ["t"]) == 0  # not loaded again: the running total
    with pytest.raises(Unauthenticated):  # a start that holds the account's record meanwhile
        with store.tables.held("t"):
            store.forget("t")
            store.start("t", _manifest(2), temporary=True)
