"""Workers KV's one write per second per key, through the real ``KVService`` and store: a second
``put`` of a key within a second of the last is refused with the platform's words, other keys
and other namespaces are not, and the key takes writes again once its second is over (a clock
seam moves time; nothing sleeps)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ember.bindings.base import BindingSpec, ServiceError
from ember.bindings.kv.service import KVService, shared_store
from tests.bindings.test_kv_daily import Host
from tests.bindings.test_kv_limits import Context


def _service(host: Host, namespace: str, account: str | None = None) -> KVService:
    options: dict[str, Any] = {"namespace_id": namespace}
    if account is not None:
        shared_store(host).store.ensure_namespace(namespace, namespace, account)
        options["account"] = account
    return KVService(BindingSpec("kv_namespace", "KV", "", options), host)


def _put(service: KVService, key: str, value: bytes) -> str | None:
    """None if written, else the error the worker sees."""

    async def run() -> str | None:
        try:
            await service.call("put", [key, value, None, None, None], Context())
        except ServiceError as exc:
            assert exc.kind == "kv"
            assert exc.data == {"status": 429}
            return str(exc)
        return None

    return asyncio.run(run())


def _get(service: KVService, key: str) -> Any:
    return asyncio.run(service.call("get", [key, None], Context()))


@pytest.mark.parametrize("account", [None, "acct"], ids=["dev", "platform"])
def test_a_second_write_to_a_key_within_a_second_is_429(
    tmp_path: Path, account: str | None
) -> None:
    host = Host(tmp_path)
    kv = _service(host, "ns", account)
    assert _put(kv, "k", b"one") is None
    host.now += 0.5
    assert _put(kv, "k", b"two") == "KV PUT failed: 429 Too Many Requests"
    assert _get(kv, "k") == [True, None, b"one"]  # the refused write changed nothing
    assert _put(kv, "other", b"x") is None  # another key of the same namespace
    host.now += 0.5  # a second after the first write: the refusal did not restart it
    assert _put(kv, "k", b"three") is None
    assert _get(kv, "k") == [True, None, b"three"]


def test_the_limit_is_per_namespace(tmp_path: Path) -> None:
    host = Host(tmp_path)
    first, second = _service(host, "ns-1"), _service(host, "ns-2")
    assert _put(first, "k", b"a") is None
    assert _put(second, "k", b"b") is None
    assert _put(first, "k", b"c") == "KV PUT failed: 429 Too Many Requests"


def test_bindings_of_one_namespace_share_the_limit(tmp_path: Path) -> None:
    """Two deployments (two services) bound to the same namespace write the same keys."""
    host = Host(tmp_path)
    one, two = _service(host, "ns", "acct"), _service(host, "ns", "acct")
    assert _put(one, "k", b"a") is None
    assert _put(two, "k", b"b") == "KV PUT failed: 429 Too Many Requests"


def test_forgetting_old_keys_keeps_the_recent_ones() -> None:
    from ember.bindings.kv.key_rate import PRUNE_AT, KeyWriteRate  # here: the rest runs on main

    now = [100.0]
    rate = KeyWriteRate(lambda: now[0])
    for i in range(PRUNE_AT - 1):
        assert rate.take("ns", f"old{i}")
    now[0] += 0.9
    assert rate.take("ns", "recent")  # the table is pruned here: nothing is over its second
    assert not rate.take("ns", "old0")
    now[0] += 0.2  # old* are over their second, recent is not
    for i in range(PRUNE_AT):
        assert rate.take("ns", f"new{i}")  # prunes the old ones on the way
    assert not rate.take("ns", "recent")
    assert rate.take("ns", "old1")
    assert len(rate._last) < 2 * PRUNE_AT + 2  # bounded by about a second's writes


def _outcome(service: KVService, method: str, args: list[Any]) -> str | None:
    """None if done, else the error the worker sees."""

    async def run() -> str | None:
        try:
            await service.call(method, args, Context())
        except ServiceError as exc:
            assert exc.kind == "kv"
            return str(exc)
        return None

    return asyncio.run(run())


def _allowed(host: Host, namespace: str, account: str, **allowances: int) -> KVService:
    shared_store(host).store.ensure_namespace(namespace, namespace, account)
    options: dict[str, Any] = {"namespace_id": namespace, "account": account, **allowances}
    return KVService(BindingSpec("kv_namespace", "KV", "", options), host)


def test_a_write_refused_by_the_key_rate_is_not_charged_for_the_day(tmp_path: Path) -> None:
    """Cloudflare bills the operations it performs; a 429 wrote nothing, so it spends none of
    the day's writes."""
    host = Host(tmp_path)
    kv = _allowed(host, "ns", "acct", kv_writes_per_day=2)
    assert _outcome(kv, "put", ["k", b"one", None, None, None]) is None
    for _ in range(3):
        assert _outcome(kv, "put", ["k", b"two", None, None, None]) == (
            "KV PUT failed: 429 Too Many Requests"
        )
    assert _outcome(kv, "put", ["j", b"w", None, None, None]) is None  # the day's second write
    assert _outcome(kv, "put", ["i", b"x", None, None, None]) == (
        "KV put() limit exceeded for the day."
    )


def test_a_write_refused_for_the_day_does_not_take_the_keys_second(tmp_path: Path) -> None:
    host = Host(tmp_path)
    spent = _allowed(host, "ns", "acct", kv_writes_per_day=1)
    assert _outcome(spent, "put", ["j", b"w", None, None, None]) is None
    assert _outcome(spent, "put", ["k", b"v", None, None, None]) == (
        "KV put() limit exceeded for the day."
    )
    paid = _allowed(host, "ns", "paid")  # another binding of the namespace, no allowance
    assert _outcome(paid, "put", ["k", b"v", None, None, None]) is None


def test_an_invalid_write_is_not_charged_for_the_day(tmp_path: Path) -> None:
    host = Host(tmp_path)
    kv = _allowed(host, "ns", "acct", kv_writes_per_day=1, kv_deletes_per_day=1)
    assert _outcome(kv, "put", ["", b"v", None, None, None]) == (
        "KV PUT failed: 400 Key names must not be empty"
    )
    assert _outcome(kv, "put", ["k", b"v", None, 5, None]) is not None  # TTL under 60 s
    assert _outcome(kv, "delete", [".."]) is not None
    assert _outcome(kv, "put", ["k", b"v", None, None, None]) is None
    assert _outcome(kv, "delete", ["other"]) is None


@pytest.mark.parametrize("account", [None, "acct"], ids=["dev", "platform"])
def test_a_delete_is_a_write_to_its_key(tmp_path: Path, account: str | None) -> None:
    """Cloudflare's per-key limit is on writes, and a delete writes the key: workers see
    ``KV DELETE failed: 429 Too Many Requests`` for one within a second of the key's last write
    (put or delete), and a put within a second of a delete is refused too."""
    host = Host(tmp_path)
    kv = _service(host, "ns", account)
    assert _put(kv, "k", b"one") is None
    host.now += 0.5
    assert _outcome(kv, "delete", ["k"]) == "KV DELETE failed: 429 Too Many Requests"
    assert _get(kv, "k") == [True, None, b"one"]  # the refused delete changed nothing
    assert _outcome(kv, "delete", ["other"]) is None  # another key (absent, still a write)
    host.now += 0.5
    assert _outcome(kv, "delete", ["k"]) is None
    assert _get(kv, "k") == [False, None, None]
    host.now += 0.5
    assert _put(kv, "k", b"two") == "KV PUT failed: 429 Too Many Requests"
    assert _outcome(kv, "delete", ["k"]) == "KV DELETE failed: 429 Too Many Requests"
    host.now += 0.5
    assert _put(kv, "k", b"three") is None
    assert _get(kv, "k") == [True, None, b"three"]


def test_a_delete_refused_by_the_key_rate_is_not_charged_for_the_day(tmp_path: Path) -> None:
    host = Host(tmp_path)
    kv = _allowed(host, "ns", "acct", kv_deletes_per_day=1)
    assert _outcome(kv, "put", ["k", b"one", None, None, None]) is None
    for _ in range(3):
        assert _outcome(kv, "delete", ["k"]) == "KV DELETE failed: 429 Too Many Requests"
    host.now += 1
    assert _outcome(kv, "delete", ["k"]) is None  # the day's one delete
    assert _outcome(kv, "delete", ["j"]) == "KV delete() limit exceeded for the day."
