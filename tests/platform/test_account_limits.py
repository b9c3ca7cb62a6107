"""Permanent accounts' caps (``platform.accounts``) over the real client/v4 API: each refused in
Cloudflare's envelope with a code, the limit's key and how to raise it; a claim switches a
temporary account to them. (``env.KV``, ``env.AI`` and CPU per request: tests/serve/test_limits.py.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ember.runtime.deployments.config import (
    PermanentAccountConfig,
    TemporaryAccountConfig,
    parse_platform_config,
)
from tests.platform.conftest import TEST_CONFIG, RunningPlatform, start_platform, worker_upload
from tests.platform.helpers import error_of, temporary_account

ACCOUNTS = {
    "max_workers": 2,
    "max_versions": 4,
    "max_kv_bytes": "2KiB",
    "max_kv_namespaces": 2,
    "cpu_ms_per_request": 100,
}
CONFIG = dataclasses.replace(
    TEST_CONFIG,
    accounts=parse_platform_config({"accounts": ACCOUNTS}).accounts,
)
RAISE = "ask the platform's operator to raise platform.accounts."


@pytest.fixture
def acme(tmp_path: Path) -> Iterator[tuple[str, httpx.Client]]:
    """A permanent account on a platform with small ``platform.accounts`` caps."""
    plane, clock, server, hub = start_platform(tmp_path / "state", CONFIG)
    try:
        with server as port:
            url = f"http://127.0.0.1:{port}"
            platform = RunningPlatform(plane, clock, url, url + "/client/v4", hub)
            account, issued = plane.accounts.create_permanent("acme")
            with platform.client(issued.token) as client:
                yield account.id, client
    finally:
        plane.close()


def put_script(client: httpx.Client, account_id: str, name: str, **kw: object) -> httpx.Response:
    body, content_type = worker_upload(**kw)
    return client.put(
        f"/accounts/{account_id}/workers/scripts/{name}?bindings_inherit=strict",
        content=body,
        headers={"content-type": content_type, "user-agent": "wrangler/4.164.0"},
    )


def post_version(client: httpx.Client, account_id: str, name: str) -> httpx.Response:
    body, content_type = worker_upload()
    return client.post(
        f"/accounts/{account_id}/workers/scripts/{name}/versions?bindings_inherit=strict",
        content=body,
        headers={"content-type": content_type},
    )


def test_workers_per_account(acme: tuple[str, httpx.Client]) -> None:
    account_id, client = acme
    for name in ("one", "two"):
        assert put_script(client, account_id, name).status_code == 200
    status, code, message = error_of(put_script(client, account_id, "three"))
    assert (status, code) == (403, 10037)
    assert "already has 2 Workers" in message and "at most 2" in message
    assert RAISE + "max_workers" in message and "claim" not in message
    assert put_script(client, account_id, "one").status_code == 200  # a redeploy creates none
    assert client.delete(f"/accounts/{account_id}/workers/scripts/two").status_code == 200
    assert put_script(client, account_id, "three").status_code == 200


def test_stored_versions_per_account(acme: tuple[str, httpx.Client]) -> None:
    account_id, client = acme
    base = f"/accounts/{account_id}/workers/scripts"
    assert put_script(client, account_id, "one").status_code == 200
    assert post_version(client, account_id, "one").status_code == 200
    secret = {"name": "S", "text": "x", "type": "secret_text"}
    assert client.put(f"{base}/one/secrets", json=secret).status_code == 200  # a version too
    assert put_script(client, account_id, "two").status_code == 200  # 4: the cap
    for refused in (
        post_version(client, account_id, "one"),
        put_script(client, account_id, "two"),
        client.put(f"{base}/two/secrets", json=secret),
    ):
        status, code, message = error_of(refused)
        assert (status, code) == (403, 10037)
        assert "stores 4 Worker versions" in message and "at most 4" in message
        assert RAISE + "max_versions" in message
    assert client.delete(f"{base}/one").status_code == 200  # its 3 versions go with it
    assert post_version(client, account_id, "two").status_code == 200


def test_kv_namespaces_per_account(acme: tuple[str, httpx.Client]) -> None:
    account_id, client = acme
    namespaces = f"/accounts/{account_id}/storage/kv/namespaces"
    for title in ("a", "b"):
        assert client.post(namespaces, json={"title": title}).status_code == 200
    status, code, message = error_of(client.post(namespaces, json={"title": "c"}))
    assert (status, code) == (403, 10037)
    assert "at most 2 KV namespaces" in message and RAISE + "max_kv_namespaces" in message


def test_kv_bytes_per_account_over_rest(acme: tuple[str, httpx.Client]) -> None:
    account_id, client = acme
    namespaces = f"/accounts/{account_id}/storage/kv/namespaces"
    ids = [client.post(namespaces, json={"title": t}).json()["result"]["id"] for t in "ab"]
    assert client.put(f"{namespaces}/{ids[0]}/values/k", content=b"x" * 1000).status_code == 200
    # Counted across the account's namespaces, for a single write and for a bulk one.
    for refused in (
        client.put(f"{namespaces}/{ids[1]}/values/k", content=b"x" * 1200),
        client.put(
            f"{namespaces}/{ids[1]}/bulk",
            json=[{"key": "small", "value": "y"}, {"key": "big", "value": "y" * 1200}],
        ),
    ):
        status, code, message = error_of(refused)
        assert (status, code) == (413, 10024)
        assert "its limit is 2,048 bytes" in message and RAISE + "max_kv_bytes" in message
    keys = client.get(f"{namespaces}/{ids[1]}/keys").json()["result"]
    assert keys == []  # a refused bulk write writes nothing
    assert client.put(f"{namespaces}/{ids[1]}/values/k", content=b"x" * 500).status_code == 200


def test_cpu_ms_per_request_caps_a_versions_own_limit(acme: tuple[str, httpx.Client]) -> None:
    account_id, client = acme
    status, code, message = error_of(put_script(client, account_id, "one", limits={"cpu_ms": 101}))
    assert (status, code) == (400, 100328)
    assert "allow at most 100 ms" in message and RAISE + "cpu_ms_per_request" in message
    assert put_script(client, account_id, "one", limits={"cpu_ms": 100}).status_code == 200


def test_a_claim_switches_the_account_to_permanent_limits(tmp_path: Path) -> None:
    config = dataclasses.replace(CONFIG, temporary=TemporaryAccountConfig(max_workers=1))
    assert config.accounts == PermanentAccountConfig(**{**ACCOUNTS, "max_kv_bytes": 2048})
    plane, clock, server, hub = start_platform(tmp_path / "state", config)
    try:
        with server as port:
            url = f"http://127.0.0.1:{port}"
            platform = RunningPlatform(plane, clock, url, url + "/client/v4", hub)
            created = temporary_account(platform)
            account_id = created["account"]["id"]  # type: ignore[index]
            with platform.client(created["account"]["apiToken"]) as client:  # type: ignore[index]
                assert put_script(client, account_id, "one").status_code == 200
                _, code, message = error_of(put_script(client, account_id, "two"))
            assert code == 10037 and "temporary accounts may have at most 1" in message
            assert "claim the account" in message
            with platform.client() as anonymous:
                claim = {"claimToken": created["claim"]["token"]}  # type: ignore[index]
                claimed = anonymous.post("/provisioning/previews/claim", json=claim)
            assert claimed.status_code == 200, claimed.text
            with platform.client(claimed.json()["result"]["apiToken"]) as owner:
                assert put_script(owner, account_id, "two").status_code == 200
                _, code, message = error_of(put_script(owner, account_id, "three"))
            assert code == 10037 and "at most 2" in message and RAISE + "max_workers" in message
    finally:
        plane.close()
