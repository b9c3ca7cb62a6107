"""The KV REST API's list cursor and key names, as Cloudflare's rules have them.

A cursor that no list returned (``';--``) was read as "from the start" and answered 200; it is
a 400 now, naming the cursor. Key names follow the reference's rules (workers-api.md §5.1: at
most 512 bytes; not empty, '.' or '..'): nothing there forbids NUL, so a key with one is stored,
read, listed and deleted like any other, never cut at the NUL.
"""

from __future__ import annotations

import httpx
import pytest

from tests.platform.conftest import RunningPlatform
from tests.platform.helpers import error_of


@pytest.fixture
def namespace(platform: RunningPlatform) -> tuple[httpx.Client, str]:
    account, issued = platform.plane.accounts.create_permanent("acme")
    client = platform.client(issued.token)
    reply = client.post(f"/accounts/{account.id}/storage/kv/namespaces", json={"title": "n"})
    return client, f"/accounts/{account.id}/storage/kv/namespaces/{reply.json()['result']['id']}"


@pytest.mark.parametrize("cursor", ["';--", "%%%", "a", "@@@@", "ab=c"])
def test_a_cursor_no_list_returned_is_a_400(
    namespace: tuple[httpx.Client, str], cursor: str
) -> None:
    client, base = namespace
    status, code, message = error_of(client.get(f"{base}/keys", params={"cursor": cursor}))
    assert (status, code) == (400, 10001) and "cursor" in message


def test_a_returned_cursor_still_pages(namespace: tuple[httpx.Client, str]) -> None:
    client, base = namespace
    for key in ("a", "b", "c"):
        assert client.put(f"{base}/values/{key}", content=b"v").status_code == 200
    first = client.get(f"{base}/keys", params={"limit": 2}).json()
    cursor = first["result_info"]["cursor"]
    second = client.get(f"{base}/keys", params={"cursor": cursor}).json()
    assert [k["name"] for k in second["result"]] == ["c"]
    assert client.get(f"{base}/keys", params={"cursor": ""}).status_code == 200


def test_a_key_with_nul_round_trips(namespace: tuple[httpx.Client, str]) -> None:
    client, base = namespace
    assert client.put(f"{base}/values/a%00b", content=b"v1").status_code == 200
    assert client.put(f"{base}/values/a", content=b"v2").status_code == 200
    assert client.get(f"{base}/values/a%00b").content == b"v1"
    names = [k["name"] for k in client.get(f"{base}/keys").json()["result"]]
    assert names == ["a", "a\x00b"]
    assert client.delete(f"{base}/values/a%00b").status_code == 200
    assert client.get(f"{base}/values/a").content == b"v2"
    assert client.get(f"{base}/values/a%00b").status_code == 404
