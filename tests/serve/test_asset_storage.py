"""What static assets cost the shared disk on ``ember serve``: each permanent account stores at
most ``platform.accounts.max_stored_asset_bytes`` of asset files (checked when a session starts,
with what other open sessions still expect, and again at each upload), and the files and manifests
no kept version nor pending upload session uses are deleted when versions are pruned or a worker
is deleted, not only with the account."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import BASE_CONFIG, ServeProcess, answer, permanent_account, put_worker

ROOT = Path(__file__).resolve().parents[2]
CONFIG = (
    BASE_CONFIG
    + """\
  versions_kept_per_worker: 2
  accounts:
    max_stored_asset_bytes: 1000
"""
)
ENTRY = """\
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response("worker")
"""


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("serve") / "state", CONFIG)
    yield process
    process.stop()


def _session(api: httpx.Client, account_id: str, manifest: dict[str, object]) -> httpx.Response:
    path = f"/accounts/{account_id}/workers/scripts/w/assets-upload-session"
    return api.post(path, json={"manifest": manifest})


def _send(api: httpx.Client, account_id: str, jwt: str, files: dict[str, str]) -> httpx.Response:
    """One bucket upload: hash -> base64 content."""
    form = {digest: (digest, encoded.encode(), "text/plain") for digest, encoded in files.items()}
    return api.post(
        f"/accounts/{account_id}/workers/assets/upload?base64=true",
        files=form,
        headers={"authorization": f"Bearer {jwt}"},
    )


def _refused_for_the_bound(reply: httpx.Response) -> None:
    assert reply.status_code == 403, reply.text
    error = reply.json()["errors"][0]
    assert error["code"] == 10037, error
    assert "max_stored_asset_bytes" in error["message"] and "1,000" in error["message"], error


def _stored(serve: ServeProcess, account_id: str) -> tuple[list[bytes], int]:
    """(the contents of the account's asset files, sorted; how many manifests it keeps)."""
    assets = serve.state_dir / "accounts" / account_id / "assets"
    files = sorted(p.read_bytes() for p in (assets / "files").iterdir())
    manifests = assets / "manifests"  # written only once a version names one
    return files, len(list(manifests.iterdir())) if manifests.is_dir() else 0


def test_an_account_stores_at_most_max_stored_asset_bytes(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "boundco")
    x600 = base64.b64encode(b"x" * 600).decode()
    with serve.api(token) as api:
        _refused_for_the_bound(
            _session(api, account_id, {"/big": {"hash": "a" * 32, "size": 1001}})
        )
        # Two sessions that each fit alone: what the first still expects counts for the second.
        first = _session(api, account_id, {"/b": {"hash": "b" * 32, "size": 600}})
        assert first.status_code == 200, first.text
        _refused_for_the_bound(_session(api, account_id, {"/c": {"hash": "c" * 32, "size": 600}}))
        done = _send(api, account_id, first.json()["result"]["jwt"], {"b" * 32: x600})
        assert done.status_code == 201, done.text
        assert _stored(serve, account_id)[0] == [b"x" * 600]  # nothing of the refused one
        # What is stored counts when the next session starts.
        _refused_for_the_bound(_session(api, account_id, {"/d": {"hash": "d" * 32, "size": 401}}))
        files = {"/b": {"hash": "b" * 32, "size": 600}, "/e": {"hash": "e" * 32, "size": 400}}
        fits = _session(api, account_id, files)
        assert fits.status_code == 200 and fits.json()["result"]["buckets"] == [["e" * 32]]


def test_files_of_an_abandoned_upload_never_lock_the_account_out(serve: ServeProcess) -> None:
    """A session that uploaded its files and never became a version (the deploy died), then
    was dropped by newer sessions: its files counted against the bound for good and every
    new session was refused, with no version to prune to get out. They go when they are in the
    way: a session refused for the bound first deletes the files nothing references."""
    from ember.runtime.deployments.assets import MAX_OPEN_SESSIONS

    account_id, token = permanent_account(serve, "abandonco")
    x900 = base64.b64encode(b"x" * 900).decode()
    with serve.api(token) as api:
        first = _session(api, account_id, {"/a": {"hash": "a" * 32, "size": 900}})
        assert first.status_code == 200, first.text
        done = _send(api, account_id, first.json()["result"]["jwt"], {"a" * 32: x900})
        assert done.status_code == 201, done.text  # uploaded; no script upload ever names it
        for i in range(MAX_OPEN_SESSIONS):  # newer sessions drop it
            assert _session(api, account_id, {"/s": {"hash": f"{i:032x}", "size": 1}}).is_success
        again = _session(api, account_id, {"/b": {"hash": "b" * 32, "size": 200}})
        assert again.status_code == 200, again.text
    assert b"x" * 900 not in _stored(serve, account_id)[0]


def test_files_no_kept_version_or_pending_session_uses_are_deleted(
    serve: ServeProcess, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "public").mkdir()
    config: dict[str, object] = {
        "name": "site",
        "main": "src/entry.py",
        "compatibility_date": "2025-06-01",
    }
    (project / "wrangler.jsonc").write_text(
        json.dumps({**config, "assets": {"directory": "public"}})
    )
    (project / "src" / "entry.py").write_text(ENTRY)
    (project / "public" / "shared.txt").write_text("S" * 100)
    account_id, token = permanent_account(serve, "cleanco")
    for page in ("v1", "v2", "v3"):  # each deploy a new manifest; 2 versions are kept
        (project / "public" / "page.txt").write_text(page)
        deployed = serve.ember(token, project, "deploy", "--json")
        assert deployed.returncode == 0, deployed.stderr
        assert serve.worker("cleanco", "site", "/page.txt").text == page
    # v1 was pruned: its page went with it; the file v2 and v3 share stays.
    assert _stored(serve, account_id) == ([b"S" * 100, b"v2", b"v3"], 2)

    # A session in progress: its file is uploaded, its version not stored yet.
    shared = next(
        p.name
        for p in (serve.state_dir / "accounts" / account_id / "assets" / "files").iterdir()
        if p.read_bytes() == b"S" * 100
    )
    manifest = {
        "/new.txt": {"hash": "f" * 32, "size": 3},
        "/shared.txt": {"hash": shared, "size": 100},
    }
    with serve.api(token) as api:
        started = _session(api, account_id, manifest).json()["result"]
        assert started["buckets"] == [["f" * 32]]
        jwt = _send(api, account_id, started["jwt"], {"f" * 32: "bmV3"}).json()["result"]["jwt"]
        assert api.delete(f"/accounts/{account_id}/workers/scripts/site").status_code == 200
        # The deleted worker's files are gone; the pending session's stay, shared one included
        # (its manifest is still the session's, in memory: on disk once a version names it).
        assert _stored(serve, account_id) == ([b"S" * 100, b"new"], 0)
        stored = put_worker(api, account_id, "later", answer("x"), assets={"jwt": jwt})
        assert stored.status_code == 200, stored.text
    assert serve.worker("cleanco", "later", "/new.txt").text == "new"
    assert serve.worker("cleanco", "later", "/shared.txt").text == "S" * 100
    with serve.api(token) as api:
        assert api.delete(f"/accounts/{account_id}/workers/scripts/later").status_code == 200
    # Its session was used by a version, now deleted: nothing references the files any more.
    assert _stored(serve, account_id) == ([], 0)


def test_part_written_files_a_kill_left_do_not_count_after_a_restart(tmp_path: Path) -> None:
    """An upload cut by kill -9 leaves its file half-written (``.part-``): it counted against
    max_stored_asset_bytes for good, and no sweep removed it. ``ember serve`` removes such
    files at start, before anything is written."""
    serve = ServeProcess(tmp_path / "state", CONFIG)
    try:
        account_id, token = permanent_account(serve, "killco")
        serve.kill9()
        files = serve.state_dir / "accounts" / account_id / "assets" / "files"
        files.mkdir(parents=True)
        (files / ".part-cut1234").write_bytes(b"x" * 900)  # what the killed upload had written
        manifests = files.parent / "manifests"
        manifests.mkdir()
        (manifests / ".part-cut5678").write_bytes(b"{")
        serve.start()
        with serve.api(token) as api:
            fits = _session(api, account_id, {"/a": {"hash": "a" * 32, "size": 200}})
            assert fits.status_code == 200, fits.text
        assert not list(files.iterdir()) and not list(manifests.iterdir())
    finally:
        serve.stop()
