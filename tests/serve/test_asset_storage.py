"""What static assets cost the shared disk on ``ember serve``: each permanent account stores at
most ``platform.accounts.max_stored_asset_bytes`` of asset files (checked when a session starts
and again at each upload, so two sessions cannot pass it together)."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pytest

from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account

CONFIG = (
    BASE_CONFIG
    + """\
  versions_kept_per_worker: 2
  accounts:
    max_stored_asset_bytes: 1000
"""
)


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
    return files, len(list((assets / "manifests").iterdir()))


def test_an_account_stores_at_most_max_stored_asset_bytes(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "boundco")
    x600, y600 = (base64.b64encode(c * 600).decode() for c in (b"x", b"y"))
    with serve.api(token) as api:
        _refused_for_the_bound(
            _session(api, account_id, {"/big": {"hash": "a" * 32, "size": 1001}})
        )
        # Two sessions that each fit alone, started before either uploads.
        first = _session(api, account_id, {"/b": {"hash": "b" * 32, "size": 600}})
        second = _session(api, account_id, {"/c": {"hash": "c" * 32, "size": 600}})
        assert first.status_code == 200 and second.status_code == 200, second.text
        done = _send(api, account_id, first.json()["result"]["jwt"], {"b" * 32: x600})
        assert done.status_code == 201, done.text
        late = _send(api, account_id, second.json()["result"]["jwt"], {"c" * 32: y600})
        _refused_for_the_bound(late)
        assert _stored(serve, account_id)[0] == [b"x" * 600]  # nothing of the refused one
        # What is stored counts when the next session starts.
        _refused_for_the_bound(_session(api, account_id, {"/d": {"hash": "d" * 32, "size": 401}}))
        files = {"/b": {"hash": "b" * 32, "size": 600}, "/e": {"hash": "e" * 32, "size": 400}}
        fits = _session(api, account_id, files)
        assert fits.status_code == 200 and fits.json()["result"]["buckets"] == [["e" * 32]]
