"""KV bulk writes and deletes through the client/v4 API: one request, one transaction.

Each item was committed (and fsynced) on its own: 10,000 items cost 10,000 flushes, and an item
refused midway (invalid, or past the account's quota) left the items before it written under a
4xx answer. Cloudflare's API refuses an invalid bulk request as a whole (an error envelope;
``unsuccessful_keys`` lists only keys a storage backend failed to take, to retry), so a refused
request now writes nothing, and the account's byte counter matches what is stored.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from ember.bindings.kv.schema import ENTRY_OVERHEAD_BYTES
from tests.platform.conftest import TEST_CONFIG
from tests.platform.helpers import error_of, temporary_tenant

QUOTA = 64 * 1024


def _recount(path: Path, account: str) -> tuple[int, int]:
    """(the account's counter, a recount of what is stored): the slow reference."""
    with sqlite3.connect(path) as db:
        counted = db.execute(
            "SELECT COALESCE(SUM(bytes), 0) FROM namespaces WHERE account = ?", (account,)
        ).fetchone()[0]
        stored, entries = db.execute(
            "SELECT COALESCE(SUM(length(kv.key) + length(kv.value) + "
            "COALESCE(length(CAST(kv.metadata AS BLOB)), 0)), 0), COUNT(*) FROM kv "
            "JOIN namespaces ON namespaces.id = kv.namespace WHERE namespaces.account = ?",
            (account,),
        ).fetchone()
    return int(counted), int(stored) + ENTRY_OVERHEAD_BYTES * int(entries)


@pytest.fixture
def tenant(tmp_path: Path):  # type: ignore[no-untyped-def]
    config = replace(TEST_CONFIG, temporary=replace(TEST_CONFIG.temporary, max_kv_bytes=QUOTA))
    with temporary_tenant(tmp_path / "state", config) as (platform, account_id, client):
        reply = client.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "n"})
        base = f"/accounts/{account_id}/storage/kv/namespaces/{reply.json()['result']['id']}"
        yield platform.plane, account_id, client, base


def _keys(client: httpx.Client, base: str) -> list[str]:
    return [k["name"] for k in client.get(f"{base}/keys").json()["result"]]


def test_a_bulk_write_whose_last_item_is_invalid_writes_nothing(tenant) -> None:  # type: ignore[no-untyped-def]
    plane, account_id, client, base = tenant
    assert client.put(f"{base}/bulk", json=[{"key": "old", "value": "1"}]).status_code == 200
    items = [{"key": f"k{i}", "value": "v" * 10} for i in range(50)]
    for bad in (
        {"key": "", "value": "x"},  # an empty key
        {"key": "k", "value": "x", "expiration_ttl": 5},  # under the 60 s minimum
        {"key": "k", "value": 7},  # not a string
    ):
        status, code, message = error_of(client.put(f"{base}/bulk", json=items + [bad]))
        assert (status, code) == (400, 10001), message
        assert _keys(client, base) == ["old"], bad
    counted, stored = _recount(plane.kv.store.path, account_id)
    assert counted == stored


def test_a_bulk_write_past_the_quota_writes_nothing(tenant) -> None:  # type: ignore[no-untyped-def]
    plane, account_id, client, base = tenant
    value = "v" * 4096
    fits = [{"key": f"a{i}", "value": value} for i in range(8)]
    assert client.put(f"{base}/bulk", json=fits).status_code == 200
    before = _recount(plane.kv.store.path, account_id)
    # Each item fits on its own; together they pass the quota with the last one.
    more = [{"key": f"b{i}", "value": value} for i in range(QUOTA // 4096)]
    status, code, message = error_of(client.put(f"{base}/bulk", json=more))
    assert (status, code) == (413, 10024), message
    assert sorted(_keys(client, base)) == sorted(f"a{i}" for i in range(8))
    assert _recount(plane.kv.store.path, account_id) == before
    assert before[0] == before[1]


def test_a_bulk_write_and_delete_apply_every_item(tenant) -> None:  # type: ignore[no-untyped-def]
    plane, account_id, client, base = tenant
    items = [{"key": f"k{i:03}", "value": str(i)} for i in range(300)]
    items.append({"key": "k000", "value": "again"})  # a key twice: the last one wins
    reply = client.put(f"{base}/bulk", json=items)
    assert reply.json()["result"] == {"successful_key_count": 301, "unsuccessful_keys": []}
    assert client.get(f"{base}/values/k000").content == b"again"
    assert len(_keys(client, base)) == 300
    reply = client.post(f"{base}/bulk/delete", json=[f"k{i:03}" for i in range(0, 300, 2)])
    assert reply.json()["result"] == {"successful_key_count": 150, "unsuccessful_keys": []}
    assert _keys(client, base) == [f"k{i:03}" for i in range(1, 300, 2)]
    counted, stored = _recount(plane.kv.store.path, account_id)
    assert counted == stored


def test_a_refused_bulk_item_is_named_by_index_and_key(tenant) -> None:  # type: ignore[no-untyped-def]
    # A 10,000-item upload refused as a whole is fixable only if the error says which item
    # failed and why; the KV API's error code is kept.
    _, _, client, base = tenant
    items = [{"key": f"k{i}", "value": "v"} for i in range(50)]
    for bad, status_code, reason in (
        ({"key": "", "value": "x"}, (400, 10001), "Key names must not be empty"),
        ({"key": "k.ttl", "value": "x", "expiration_ttl": 5}, (400, 10001), "expiration_ttl"),
        ({"key": "k" * 600, "value": "x"}, (414, 10001), "exceeds key length limit of 512"),
        ({"key": "k.meta", "value": "x", "metadata": "m" * 2000}, (413, 10024), "Metadata"),
        ({"key": "k.b64", "value": "%%", "base64": True}, (400, 10001), "not valid base64"),
        ({"key": "k.int", "value": 7}, (400, 10001), "'value'"),
    ):
        status, code, message = error_of(client.put(f"{base}/bulk", json=items + [bad]))
        assert (status, code) == status_code, message
        assert "bulk item 50" in message and repr(bad["key"])[:40] in message, message
        assert reason in message, message
