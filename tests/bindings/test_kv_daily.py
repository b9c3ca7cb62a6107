"""Daily KV operation allowances on the real ``KVService`` and store: reads, writes, deletes and
lists counted per account per UTC day, refused with the words the KV binding throws on
Cloudflare's Free plan past its daily limit, and given back at 00:00 UTC (a clock seam moves the
day; nothing sleeps)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ember.bindings.base import BindingSpec, ServiceError
from ember.bindings.kv.service import KVService, shared_store
from tests.bindings.test_kv_limits import Context

T = TypeVar("T")
MIDNIGHT = 1_800_000_000 - 1_800_000_000 % 86_400  # 00:00 UTC of some day
NOON = MIDNIGHT + 12 * 3600


class Host:
    """A ServiceHost whose clock the test moves."""

    def __init__(self, state_dir: Path) -> None:
        self.deployment_id = "test"
        self.state_dir = state_dir
        self.now = float(NOON)
        self._objects: dict[str, Any] = {}

    def clock(self) -> float:
        return self.now

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        if key not in self._objects:
            self._objects[key] = factory()
        return self._objects[key]  # type: ignore[no-any-return]


ALLOWANCES = {
    "kv_reads_per_day": 3,
    "kv_writes_per_day": 2,
    "kv_deletes_per_day": 1,
    "kv_lists_per_day": 1,
}


def _service(host: Host, namespace: str, account: str, **options: Any) -> KVService:
    store = shared_store(host).store
    store.ensure_namespace(namespace, namespace, account)
    spec = BindingSpec(
        "kv_namespace", "KV", "", {"namespace_id": namespace, "account": account, **options}
    )
    return KVService(spec, host)


def _refusal(service: KVService, method: str, args: list[Any]) -> str:
    async def run() -> str:
        with pytest.raises(ServiceError) as refused:
            await service.call(method, args, Context())
        assert refused.value.kind == "kv"
        assert refused.value.data == {"status": 429}
        return str(refused.value)

    return asyncio.run(run())


def _ok(service: KVService, method: str, args: list[Any]) -> Any:
    return asyncio.run(service.call(method, args, Context()))


def test_each_kind_has_its_own_allowance_and_the_platforms_words(tmp_path: Path) -> None:
    host = Host(tmp_path)
    kv = _service(host, "ns", "acct", **ALLOWANCES)
    put = ["k", b"v", None, None, None]
    assert _ok(kv, "put", put) is None
    assert _ok(kv, "put", ["j", b"w", None, None, None]) is None
    host.now += 1  # past the keys' second (one write per second per key: key_rate.py)
    assert _refusal(kv, "put", put) == "KV put() limit exceeded for the day."
    # A refused write stored nothing.
    assert _ok(kv, "get", ["k", None])[2] == b"v"
    # A bulk read counts each key it names (missing ones too, as the platform bills them).
    assert _refusal(kv, "get_bulk", [["k", "j", "x"], "text", None]) == (
        "KV get() limit exceeded for the day."
    )
    assert _ok(kv, "get_bulk", [["k", "missing"], "text", None])[0][1][0] is False
    assert _refusal(kv, "get", ["k", None]) == "KV get() limit exceeded for the day."
    assert _ok(kv, "delete", ["j"]) is None
    assert _refusal(kv, "delete", ["k"]) == "KV delete() limit exceeded for the day."
    assert _ok(kv, "list", [None, None, None])["list_complete"] is True
    assert _refusal(kv, "list", [None, None, None]) == "KV list() limit exceeded for the day."


def test_the_allowance_is_the_accounts_and_resets_at_midnight_utc(tmp_path: Path) -> None:
    host = Host(tmp_path)
    first = _service(host, "ns1", "acct", kv_writes_per_day=2)
    second = _service(host, "ns2", "acct", kv_writes_per_day=2)  # another binding, one account
    other = _service(host, "ns3", "other", kv_writes_per_day=2)
    unlimited = _service(host, "ns4", "paid")  # no allowance: a permanent account's default
    put = ["k", b"v", None, None, None]
    _ok(first, "put", put)
    _ok(second, "put", put)
    fresh = ["fresh", b"v", None, None, None]  # another key: not refused for the key's second
    assert _refusal(first, "put", fresh) == "KV put() limit exceeded for the day."
    assert _refusal(second, "put", fresh) == "KV put() limit exceeded for the day."
    _ok(other, "put", put)  # another account's day is its own
    for i in range(5):  # distinct keys: one key takes one write per second (key_rate.py)
        _ok(unlimited, "put", [f"k{i}", b"v", None, None, None])

    host.now = MIDNIGHT + 86_400 - 0.001  # 23:59:59.999 UTC: the same day
    assert _refusal(first, "put", put) == "KV put() limit exceeded for the day."
    host.now = MIDNIGHT + 86_400  # 00:00 UTC: a new day, a full allowance
    _ok(first, "put", put)
    _ok(second, "put", put)
    assert _refusal(first, "put", fresh) == "KV put() limit exceeded for the day."
