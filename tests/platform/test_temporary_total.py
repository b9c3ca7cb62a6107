"""What all temporary accounts together may store (``platform.temporary.max_total_stored_bytes``)
over the real client/v4 API and stores: their kept Worker versions and their KV data count
toward one cap, an upload or a KV write past it is refused naming it, a permanent account is
neither counted nor held to it, and claiming an account takes its bytes out of the count."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path

import httpx
import pytest

from ember.runtime.deployments.config import parse_platform_config
from ember.runtime.deployments.errors import Unauthenticated
from tests.platform.conftest import TEST_CONFIG, RunningPlatform, start_platform, worker_upload
from tests.platform.helpers import error_of, temporary_account

KIB = 1024
CONFIG = dataclasses.replace(
    TEST_CONFIG,
    temporary=parse_platform_config(
        {"temporary": {"max_total_stored_bytes": "64KiB", "max_kv_bytes": "1MiB"}}
    ).temporary,
)
KEY = "platform.temporary.max_total_stored_bytes"


def _put(client: httpx.Client, account_id: str, name: str, size: int) -> httpx.Response:
    body, content_type = worker_upload(source=b"print('hi')\n#" + b"x" * size + b"\n")
    return client.put(
        f"/accounts/{account_id}/workers/scripts/{name}?bindings_inherit=strict",
        content=body,
        headers={"content-type": content_type},
    )


def _namespace(client: httpx.Client, account_id: str) -> str:
    made = client.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "t"})
    assert made.status_code == 200, made.text
    return f"/accounts/{account_id}/storage/kv/namespaces/{made.json()['result']['id']}"


def _refused(reply: httpx.Response, status: int, code: int) -> str:
    got_status, got_code, message = error_of(reply)
    assert (got_status, got_code) == (status, code), message
    assert KEY in message and "temporary accounts" in message, message
    return message


def test_temporary_accounts_together_stay_under_the_cap(tmp_path: Path) -> None:
    plane, clock, server, hub = start_platform(tmp_path / "state", CONFIG)
    try:
        with server as port:
            url = f"http://127.0.0.1:{port}"
            platform = RunningPlatform(plane, clock, url, url + "/client/v4", hub)
            first, second = temporary_account(platform), temporary_account(platform)
            a, b = (str(t["account"]["id"]) for t in (first, second))  # type: ignore[index]
            with (
                platform.client(str(first["account"]["apiToken"])) as alice,  # type: ignore[index]
                platform.client(str(second["account"]["apiToken"])) as bob,  # type: ignore[index]
            ):
                assert _put(alice, a, "big", 30 * KIB).status_code == 200
                values = _namespace(alice, a)
                assert alice.put(f"{values}/values/k", content=b"v" * 10 * KIB).status_code == 200
                # ~41 KiB stored in all: bob's 30 KiB Worker would pass 64 KiB.
                message = _refused(_put(bob, b, "w", 30 * KIB), 403, 10037)
                assert "claim the account" in message
                assert _put(bob, b, "w", 10 * KIB).status_code == 200  # ~52 KiB: fits
                # KV writes are held to the same cap, one by one and in bulk.
                bobs = _namespace(bob, b)
                _refused(bob.put(f"{bobs}/values/k", content=b"v" * 15 * KIB), 413, 10024)
                bulk = [{"key": "a", "value": "v" * 8 * KIB}, {"key": "b", "value": "v" * 8 * KIB}]
                _refused(bob.put(f"{bobs}/bulk", json=bulk), 413, 10024)
                assert bob.put(f"{bobs}/values/k", content=b"v" * 5 * KIB).status_code == 200

                # A permanent account is neither held to the cap nor counted in it.
                acme, issued = plane.accounts.create_permanent("acme")
                with platform.client(issued.token) as owner:
                    assert _put(owner, acme.id, "huge", 200 * KIB).status_code == 200
                    mine = _namespace(owner, acme.id)
                    assert owner.put(f"{mine}/values/k", content=b"v" * 50 * KIB).status_code == 200
                assert bob.put(f"{bobs}/values/j", content=b"v" * 1 * KIB).status_code == 200

                # Claiming alice's account takes her ~41 KiB out of the temporary accounts' count.
                with platform.client() as anonymous:
                    claim = {"claimToken": first["claim"]["token"]}  # type: ignore[index]
                    claimed = anonymous.post("/provisioning/previews/claim", json=claim)
                assert claimed.status_code == 200, claimed.text
                assert _put(bob, b, "more", 30 * KIB).status_code == 200
                assert bob.put(f"{bobs}/values/m", content=b"v" * 10 * KIB).status_code == 200
    finally:
        plane.close()


def test_the_default_cap_is_a_quarter_of_the_free_disk_at_start(tmp_path: Path) -> None:
    import shutil

    plane, *_ = start_platform(tmp_path / "state")
    try:
        free = shutil.disk_usage(tmp_path / "state").free
        cap = plane.temporary_total.max_bytes
        assert 0.2 * free < cap < 0.3 * free, (cap, free)
    finally:
        plane.close()


def _assets(client: httpx.Client, account_id: str, content: bytes, digest: str) -> httpx.Response:
    """An assets upload session for one file, then the file, with the session's token."""
    manifest = {"/f.bin": {"hash": digest, "size": len(content)}}
    path = f"/accounts/{account_id}/workers/scripts/site/assets-upload-session"
    started = client.post(path, json={"manifest": manifest})
    if started.status_code != 200:
        return started
    token = started.json()["result"]["jwt"]
    return client.post(
        f"/accounts/{account_id}/workers/assets/upload?base64=true",
        files={digest: (digest, base64.b64encode(content), "application/octet-stream")},
        headers={"authorization": f"Bearer {token}"},
    )


def test_temporary_accounts_static_assets_count_toward_the_cap(tmp_path: Path) -> None:
    plane, clock, server, hub = start_platform(tmp_path / "state", CONFIG)
    try:
        with server as port:
            url = f"http://127.0.0.1:{port}"
            platform = RunningPlatform(plane, clock, url, url + "/client/v4", hub)
            first, second = temporary_account(platform), temporary_account(platform)
            a, b = (str(t["account"]["id"]) for t in (first, second))  # type: ignore[index]
            with (
                platform.client(str(first["account"]["apiToken"])) as alice,  # type: ignore[index]
                platform.client(str(second["account"]["apiToken"])) as bob,  # type: ignore[index]
            ):
                stored = _assets(alice, a, b"a" * 40 * KIB, "a" * 32)
                assert stored.status_code == 201, stored.text
                # 40 KiB of alice's assets stored: bob's 30 KiB would pass 64 KiB.
                message = _refused(_assets(bob, b, b"b" * 30 * KIB, "b" * 32), 403, 10037)
                assert "static assets" in message
                # ...and versions and KV writes count them too: the pool filled with assets
                # could be filled again with Workers and KV data.
                message = _refused(_put(bob, b, "w", 30 * KIB), 403, 10037)
                assert "static assets" in message
                bobs = _namespace(bob, b)
                _refused(bob.put(f"{bobs}/values/k", content=b"v" * 30 * KIB), 413, 10024)
                assert _assets(bob, b, b"c" * 10 * KIB, "c" * 32).status_code == 201
    finally:
        plane.close()


def test_claimed_and_deleted_accounts_assets_leave_the_pool(tmp_path: Path) -> None:
    """The pool's asset bytes are a running total: a claimed account's files and a deleted
    (expired) account's leave it, or they would count against everybody else for good."""
    plane, clock, server, hub = start_platform(tmp_path / "state", CONFIG)
    try:
        with server as port:
            url = f"http://127.0.0.1:{port}"
            platform = RunningPlatform(plane, clock, url, url + "/client/v4", hub)
            first, second = temporary_account(platform), temporary_account(platform)
            a, c = (str(t["account"]["id"]) for t in (first, second))  # type: ignore[index]
            with (
                platform.client(str(first["account"]["apiToken"])) as alice,  # type: ignore[index]
                platform.client(str(second["account"]["apiToken"])) as carol,  # type: ignore[index]
            ):
                assert _assets(alice, a, b"a" * 40 * KIB, "a" * 32).status_code == 201
                _refused(_assets(carol, c, b"c" * 30 * KIB, "c" * 32), 403, 10037)
                with platform.client() as anonymous:
                    claim = {"claimToken": first["claim"]["token"]}  # type: ignore[index]
                    assert anonymous.post("/provisioning/previews/claim", json=claim).is_success
                assert _assets(carol, c, b"c" * 30 * KIB, "c" * 32).status_code == 201
            clock.advance(CONFIG.temporary.ttl_seconds + 1)
            assert plane.gc.collect().accounts_deleted == (c,)
            third = temporary_account(platform)
            b = str(third["account"]["id"])  # type: ignore[index]
            with platform.client(str(third["account"]["apiToken"])) as bob:  # type: ignore[index]
                assert _assets(bob, b, b"b" * 40 * KIB, "b" * 32).status_code == 201
    finally:
        plane.close()


def _temporary_ids(platform: RunningPlatform) -> list[str]:
    query = "SELECT id FROM accounts WHERE kind = 'temporary' AND deleted_at IS NULL"
    with platform.plane.db.reader() as conn:
        return [str(row[0]) for row in conn.execute(query)]


def _pool_is_true(platform: RunningPlatform) -> None:
    """The pool's running total is the recount of the temporary accounts' files and sessions."""
    plane = platform.plane
    recount = plane.assets.stored_bytes(_temporary_ids(platform))
    assert plane._temporary_asset_bytes() == recount


def test_a_session_started_across_a_claim_does_not_put_the_account_back(tmp_path: Path) -> None:
    """The route read the account (temporary) and queued the session's start on an upload
    thread; the account was claimed in between. The start counted the claimed account in the
    pool again (with no session of its own to end it), and an honest temporary upload was
    refused: the start sees the claim under the account's lock and is refused."""
    plane, clock, server, hub = start_platform(tmp_path / "state", CONFIG)
    try:
        with server as port:
            url = f"http://127.0.0.1:{port}"
            platform = RunningPlatform(plane, clock, url, url + "/client/v4", hub)
            first, second = temporary_account(platform), temporary_account(platform)
            a, c = (str(t["account"]["id"]) for t in (first, second))  # type: ignore[index]
            with (
                platform.client(str(first["account"]["apiToken"])) as alice,  # type: ignore[index]
                platform.client(str(second["account"]["apiToken"])) as carol,  # type: ignore[index]
            ):
                assert _assets(alice, a, b"a" * 40 * KIB, "a" * 32).status_code == 201
                read_by_the_route = plane.accounts.get(a)
                assert read_by_the_route.temporary
                with platform.client() as anonymous:
                    claim = {"claimToken": first["claim"]["token"]}  # type: ignore[index]
                    assert anonymous.post("/provisioning/previews/claim", json=claim).is_success
                body = {"manifest": {"/z": {"hash": "d" * 32, "size": 1}}}
                held = plane.assets.tables.tokens(a)  # the completed session of alice's upload
                with pytest.raises(Unauthenticated, match="claimed or deleted"):
                    plane.start_assets(read_by_the_route, body)
                assert plane.assets.tables.tokens(a) == held
                _pool_is_true(platform)
                assert _assets(carol, c, b"c" * 30 * KIB, "c" * 32).status_code == 201
                _pool_is_true(platform)
    finally:
        plane.close()


def test_a_session_started_across_a_deletion_writes_nothing(tmp_path: Path) -> None:
    """A start authenticated before the account expired and was deleted ran after: its
    session opened, its upload stored a file under the deleted account's folder for good, and
    the pool counted bytes of an account that no longer exists."""
    plane, clock, server, hub = start_platform(tmp_path / "state", CONFIG)
    try:
        with server as port:
            url = f"http://127.0.0.1:{port}"
            platform = RunningPlatform(plane, clock, url, url + "/client/v4", hub)
            first = temporary_account(platform)
            a = str(first["account"]["id"])  # type: ignore[index]
            read_by_the_route = plane.accounts.get(a)
            clock.advance(CONFIG.temporary.ttl_seconds + 1)
            assert plane.gc.collect().accounts_deleted == (a,)
            body = {"manifest": {"/z": {"hash": "d" * 32, "size": 30 * KIB}}}
            with pytest.raises(Unauthenticated, match="claimed or deleted"):
                plane.start_assets(read_by_the_route, body)
            assert not (plane.files.root / a).exists()
            _pool_is_true(platform)
    finally:
        plane.close()
