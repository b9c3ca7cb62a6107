"""KV limits at and just over each boundary, with the platform's exact messages."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ember.bindings.base import BindingSpec
from ember.bindings.kv import limits
from ember.bindings.kv.service import KVService
from ember.bindings.kv.store import KVStore

T = TypeVar("T")
NOW = 1_800_000_000.0


class Host:
    """A ServiceHost for one test: its own state directory and a fixed clock."""

    def __init__(self, state_dir: Path) -> None:
        self.deployment_id = "test"
        self.state_dir = state_dir
        self._objects: dict[str, Any] = {}

    def clock(self) -> float:
        return NOW

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        if key not in self._objects:
            self._objects[key] = factory()
        return self._objects[key]  # type: ignore[no-any-return]


class Context:
    """A CallContext with an optional upload."""

    def __init__(self, upload: AsyncIterator[bytes] | None = None) -> None:
        self.deployment_id = "test"
        self.request_id = 1
        self.upload = upload
        self.counters: dict[str, int] = {}

    def count(self, counter: str) -> int:
        self.counters[counter] = self.counters.get(counter, 0) + 1
        return self.counters[counter]


def _call(tmp_path: Path, method: str, args: list[Any], ctx: Context | None = None) -> Any:
    async def run() -> Any:
        service = KVService(
            BindingSpec("kv_namespace", "KV", "", {"namespace_id": "ns"}), Host(tmp_path)
        )
        try:
            return await service.call(method, args, ctx or Context())
        finally:
            await service._store.aclose()

    return asyncio.run(run())


def _put(
    tmp_path: Path,
    key: Any = "k",
    value: bytes | None = b"v",
    expiration: Any = None,
    ttl: Any = None,
    metadata: Any = None,
) -> Any:
    return _call(tmp_path, "put", [key, value, expiration, ttl, metadata])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"key": "k" * 513},
            "KV PUT failed: 414 UTF-8 encoded length of 513 exceeds key length limit of 512.",
        ),
        (
            {"key": "é" * 257},
            "KV PUT failed: 414 UTF-8 encoded length of 514 exceeds key length limit of 512.",
        ),
        ({"key": ""}, "KV PUT failed: 400 Key names must not be empty"),
        ({"key": ".."}, 'KV PUT failed: 400 Illegal key name "..". Please use a different name.'),
        (
            {"ttl": 59},
            "KV PUT failed: 400 Invalid expiration_ttl of 59. Expiration TTL must be at least 60.",
        ),
        (
            {"ttl": 0},
            "KV PUT failed: 400 Invalid expiration_ttl of 0. "
            "Please specify integer greater than 0.",
        ),
        (
            {"expiration": NOW + 59},
            "KV PUT failed: 400 Invalid expiration of 1800000059.0. "
            "Expiration times must be at least 60 seconds in the future.",
        ),
        (
            {"expiration": NOW},
            "KV PUT failed: 400 Invalid expiration of 1800000000.0. Please specify integer "
            "greater than the current number of seconds since the UNIX epoch.",
        ),
        (
            {"metadata": '"' + "m" * 1023 + '"'},
            "KV PUT failed: 413 Metadata length of 1025 exceeds limit of 1024.",
        ),
    ],
)
def test_put_limits_and_messages(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(limits.KVError) as info:
        _put(tmp_path, **kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "kwargs",
    [
        {"key": "k" * 512},
        {"ttl": 60},
        {"expiration": NOW + 60},
        {"metadata": '"' + "m" * 1022 + '"'},
    ],
)
def test_put_at_each_boundary_is_accepted(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    assert _put(tmp_path, **kwargs) is None


def test_value_size_limit_counts_the_whole_upload(tmp_path: Path) -> None:
    async def upload(total: int) -> AsyncIterator[bytes]:
        for start in range(0, total, 1 << 20):
            yield b"v" * min(1 << 20, total - start)

    exact = limits.MAX_VALUE_BYTES
    assert _call(tmp_path, "put", ["k", None, None, None, None], Context(upload(exact))) is None
    with pytest.raises(limits.KVError) as info:
        _call(tmp_path, "put", ["k", None, None, None, None], Context(upload(exact + 1)))
    assert (
        str(info.value) == "KV PUT failed: 413 Value length of 26214401 exceeds limit of 26214400."
    )


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        (
            0,
            "KV LIST failed: 400 Invalid key_count_limit of 0. "
            "Please specify an integer greater than 0.",
        ),
        (
            1001,
            "KV LIST failed: 400 Invalid key_count_limit of 1001. "
            "Please specify an integer less than 1000.",
        ),
    ],
)
def test_list_limit_bounds(tmp_path: Path, limit: int, message: str) -> None:
    with pytest.raises(limits.KVError) as info:
        _call(tmp_path, "list", [None, limit, None])
    assert str(info.value) == message
    assert _call(tmp_path, "list", [None, 1000, None])["list_complete"] is True


def test_get_cache_ttl_minimum_and_ops_per_request(tmp_path: Path) -> None:
    with pytest.raises(
        limits.KVError, match="Invalid cache_ttl of 29. Cache TTL must be at least 30."
    ):
        _call(tmp_path, "get", ["k", 29])
    assert _call(tmp_path, "get", ["k", 30]) == [False, None, None]
    ctx = Context()
    ctx.counters["kv_ops"] = limits.MAX_OPS_PER_REQUEST
    with pytest.raises(limits.KVError, match="Too many API requests by single worker invocation."):
        _call(tmp_path, "get", ["k", None], ctx)


def test_malformed_arguments_are_refused_not_crashing(tmp_path: Path) -> None:
    for args in ([], ["k"], [1, None], [["k"], None]):
        with pytest.raises(limits.KVError):
            _call(tmp_path, "get", args)
    with pytest.raises(limits.KVError, match="unknown KV method"):
        _call(tmp_path, "drop_table", [])
    KVStore(tmp_path / "kv.sqlite3").close()
