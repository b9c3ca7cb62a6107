"""A temporary account's daily KV operations over the KV REST API (``platform.temporary``
``kv_*_per_day``): each pair of a bulk request counts, past the allowance the API answers as
Cloudflare's does on the Free plan (429, code 10048), and 00:00 UTC gives it back. A permanent
account has no daily allowance by default. (``env.KV``: tests/bindings/test_kv_daily.py and
tests/serve/test_free_plan.py.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx

from ember.runtime.deployments.config import parse_platform_config
from tests.platform.conftest import TEST_CONFIG
from tests.platform.helpers import error_of, temporary_tenant

TEMPORARY = {
    "ttl": "3d",  # the test moves the clock a day and more
    "kv_reads_per_day": 4,
    "kv_writes_per_day": 3,
    "kv_deletes_per_day": 2,
    "kv_lists_per_day": 1,
}
CONFIG = dataclasses.replace(
    TEST_CONFIG, temporary=parse_platform_config({"temporary": TEMPORARY}).temporary
)
DAILY = "your account has reached the free usage limit for this operation for today"


def _namespace(client: httpx.Client, account_id: str) -> str:
    made = client.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "t"})
    assert made.status_code == 200, made.text
    return f"/accounts/{account_id}/storage/kv/namespaces/{made.json()['result']['id']}"


def _spent(reply: httpx.Response) -> None:
    assert error_of(reply) == (429, 10048, DAILY)


def test_temporary_accounts_daily_kv_operations_over_rest(tmp_path: Path) -> None:
    with temporary_tenant(tmp_path / "state", CONFIG) as (platform, account_id, client):
        now = platform.clock.now
        platform.clock.now = now - now % 86_400 + 86_400 + 3600  # 01:00 UTC tomorrow
        ns = _namespace(client, account_id)
        assert client.put(f"{ns}/values/a", content=b"1").status_code == 200
        # A bulk write of two pairs is two writes: three in all, the whole allowance.
        pairs = [{"key": "b", "value": "2"}, {"key": "c", "value": "3"}]
        assert client.put(f"{ns}/bulk", json=pairs).status_code == 200
        _spent(client.put(f"{ns}/values/d", content=b"4"))
        _spent(client.put(f"{ns}/bulk", json=[{"key": "d", "value": "4"}]))
        assert client.get(f"{ns}/values/d").status_code == 404  # nothing was written

        # Reads: that 404 was one; a value, its metadata, and a bulk read of one key more.
        assert client.get(f"{ns}/values/a").content == b"1"
        assert client.get(f"{ns}/metadata/a").status_code == 200
        _spent(client.post(f"{ns}/bulk/get", json={"keys": ["a", "b"]}))
        assert client.post(f"{ns}/bulk/get", json={"keys": ["a"]}).status_code == 200
        _spent(client.get(f"{ns}/values/a"))

        assert client.get(f"{ns}/keys").status_code == 200
        _spent(client.get(f"{ns}/keys"))
        assert client.delete(f"{ns}/values/a").status_code == 200
        _spent(client.post(f"{ns}/bulk/delete", json=["b", "c"]))
        assert client.post(f"{ns}/bulk/delete", json=["b"]).status_code == 200
        _spent(client.delete(f"{ns}/values/c"))

        # 23:59:59 UTC is the same day; 00:00 UTC the next, with every allowance whole again.
        platform.clock.now += 23 * 3600 - 1
        _spent(client.put(f"{ns}/values/d", content=b"4"))
        platform.clock.now += 1
        assert client.put(f"{ns}/values/d", content=b"4").status_code == 200
        assert client.get(f"{ns}/values/d").content == b"4"
        assert client.get(f"{ns}/keys").json()["result"] == [{"name": "c"}, {"name": "d"}]


def test_permanent_accounts_have_no_daily_kv_allowance_by_default(tmp_path: Path) -> None:
    with temporary_tenant(tmp_path / "state", CONFIG) as (platform, _, _client):
        account, issued = platform.plane.accounts.create_permanent("acme")
        with platform.client(issued.token) as client:
            ns = _namespace(client, account.id)
            for index in range(6):
                assert client.put(f"{ns}/values/k{index}", content=b"v").status_code == 200
                assert client.get(f"{ns}/keys").status_code == 200


def test_an_invalid_rest_write_is_not_charged(tmp_path: Path) -> None:
    """A write the API refuses as invalid (a key of ".", a past expiration) wrote nothing, so it
    costs none of the day's writes, as ``env.KV``'s refusals cost nothing."""
    with temporary_tenant(tmp_path / "state", CONFIG) as (_platform, account_id, client):
        ns = _namespace(client, account_id)
        assert client.put(f"{ns}/values/%2E", content=b"x").status_code == 400
        assert client.put(f"{ns}/values/k?expiration=1", content=b"x").status_code == 400
        for key in ("a", "b", "c"):  # the whole allowance is still there
            assert client.put(f"{ns}/values/{key}", content=b"1").status_code == 200
        _spent(client.put(f"{ns}/values/d", content=b"4"))


def test_an_invalid_bulk_read_or_delete_is_not_charged(tmp_path: Path) -> None:
    """A bulk read or delete with an empty or over-long key is refused whole, before any key is
    charged: the day's reads and deletes are all still there afterwards."""
    with temporary_tenant(tmp_path / "state", CONFIG) as (_platform, account_id, client):
        ns = _namespace(client, account_id)
        assert client.put(f"{ns}/values/a", content=b"1").status_code == 200
        for keys in (["a", ""], ["a", "k" * 600], ["a", "."]):
            status, code, message = error_of(client.post(f"{ns}/bulk/get", json={"keys": keys}))
            assert (status, code) in ((400, 10001), (414, 10001)), message
            assert "bulk item 1" in message, message
            status, code, message = error_of(client.post(f"{ns}/bulk/delete", json=keys))
            assert (status, code) in ((400, 10001), (414, 10001)), message
            assert "bulk item 1" in message, message
        assert client.get(f"{ns}/values/a").content == b"1"  # nothing was deleted
        got = client.post(f"{ns}/bulk/get", json={"keys": ["a", "b", "c"]})  # 1 + 3 reads
        assert got.status_code == 200, got.text
        _spent(client.get(f"{ns}/values/a"))
        assert client.post(f"{ns}/bulk/delete", json=["a", "b"]).status_code == 200  # 2
        _spent(client.delete(f"{ns}/values/c"))
