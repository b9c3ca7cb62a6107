"""Supervisor side of a KV binding: validates every call, then reads or writes the store.

One ``KVService`` per deployment and binding; it can touch only its own namespace id (from the
deployment's spec, never from the call). A platform may add ``account``, ``max_account_bytes``
and ``quota_remedy`` (how to get more room, for the refusal's message) to the spec's options:
writes are then refused past the account's byte limit. It may add ``kv_reads_per_day`` (and
writes, deletes, lists: ``daily.py``): the account's operations are then counted per UTC day and
refused past them, as on Cloudflare's Free plan. With ``kv_pool`` (a temporary account's) its
writes are also held to what all temporary accounts may store together (``pool.py``), the pool's
figures from the platform's ``KVPoolSource`` under ``POOL_SOURCE_KEY``. The store is shared by every
deployment of the supervisor (``ServiceHost.shared``); its reads never wait for writes, and its
writes are served account by account in turn (``async_store.py``): the owner of this binding's
writes is its account, or in ``ember dev`` its namespace. A key written (put or deleted) through a
binding less than a second ago refuses the next ``put`` or ``delete`` (``KV PUT failed: 429 Too
Many Requests``, ``KV DELETE failed: ...``, as on Cloudflare: ``key_rate.py``). An operation is
charged to the day's allowance only once it passed validation and, for a write, the key's rate:
a refused one is not charged.

Wire format (the client in ``client.py`` is the only other party):

    get              [key, cache_ttl]                          -> [found, metadata, body] | stream
    get_bulk         [keys, type, cache_ttl]  -> [[[found, metadata, length]...], bodies] | stream
    put              [key, body|None, expiration, ttl, metadata] (+ upload when body is None)
    delete           [key]
    list             [prefix, limit, cursor]                   -> {keys, list_complete, cursor?}
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ember.bindings.base import BindingService, BindingSpec, CallContext, ServiceHost, StreamReply
from ember.bindings.kv import key_rate, limits
from ember.bindings.kv.async_store import AsyncKVStore
from ember.bindings.kv.daily import KVAllowances, KVDailyLimitExceeded
from ember.bindings.kv.records import KVPoolSource, KVWrite
from ember.bindings.kv.store import KVEntry, KVQuota, KVQuotaExceeded, KVStore
from ember.errors import NotFound
from ember.storage import StorageFull

# Values up to this size travel inside the reply frame; larger ones are streamed.
INLINE_VALUE_BYTES = 256 * 1024
STREAM_CHUNK_BYTES = 64 * 1024
STORE_KEY = "kv.store"
STORE_FILE = "kv.sqlite3"
POOL_SOURCE_KEY = "kv.pool_source"  # ember serve's control plane: a ``KVPoolSource``
POOL_OPTION = "kv_pool"


def shared_store(host: ServiceHost) -> AsyncKVStore:
    """The supervisor's one KV store, under its state directory."""
    return host.shared(
        STORE_KEY, lambda: AsyncKVStore(KVStore(host.state_dir / STORE_FILE, clock=host.clock))
    )


class KVService(BindingService):
    """KV operations on one namespace, for one deployment."""

    def __init__(self, spec: BindingSpec, host: ServiceHost) -> None:
        namespace_id = spec.options.get("namespace_id")
        if not isinstance(namespace_id, str) or not namespace_id:
            raise ValueError(f"KV binding {spec.name} has no namespace id")
        self.namespace_id = namespace_id
        self.binding = spec.name
        self._clock = host.clock
        self._store = shared_store(host)
        self._ready = False
        self._title = f"{host.deployment_id}-{spec.name}"
        account = spec.options.get("account")
        self._account = account if isinstance(account, str) and account else None
        # Whose turn this binding's writes take on the store's writer (fair_writer.py): the
        # account's, shared with its REST API calls; in ``ember dev`` the namespace's.
        self._owner = self._account or f"namespace:{namespace_id}"
        max_bytes = spec.options.get("max_account_bytes")
        remedy = spec.options.get("quota_remedy")
        self._quota = (
            KVQuota(self._account, max_bytes, remedy if isinstance(remedy, str) else "")
            if self._account and isinstance(max_bytes, int) and max_bytes > 0
            else None
        )
        self._allowances = KVAllowances.of_options(spec.options) if self._account else None
        pooled = self._quota is not None and spec.options.get(POOL_OPTION) is True
        source = host.shared(POOL_SOURCE_KEY, lambda: None) if pooled else None
        self._pool: KVPoolSource | None = source

    async def call(self, method: str, args: list[Any], ctx: CallContext) -> object | StreamReply:
        """Dispatch one operation (each counts against the per-request limit)."""
        op = {
            "get": "GET",
            "get_bulk": "GET_BULK",
            "put": "PUT",
            "delete": "DELETE",
            "list": "LIST",
        }.get(method)
        if op is None:
            raise limits.KVError("CALL", 400, f"unknown KV method {method!r}")
        if ctx.count("kv_ops") > limits.MAX_OPS_PER_REQUEST:
            raise limits.KVError(op, 429, "Too many API requests by single worker invocation.")
        try:
            return await self._call(op, method, args, ctx)
        except KVDailyLimitExceeded as exc:
            raise exc.for_binding() from None
        except StorageFull as exc:  # the operator's log has the store; the worker its words
            raise limits.KVError(op, exc.http_status, str(exc)) from None

    def _spend(self, kind: str, count: int = 1) -> None:
        """Count ``count`` operations of ``kind`` against the account's daily allowance (raises
        ``KVDailyLimitExceeded`` past it). Called once the operation was found valid, before the
        store is touched: what the binding refuses (invalid, 429) is not charged."""
        if self._allowances is None or self._account is None:
            return
        self._store.daily.take(self._account, self._allowances, kind, count)

    def _admit_write(self, op: str, kind: str, key: str) -> None:
        """A put or delete of ``key``: refused (429) within a second of the key's last write,
        then charged to the day, then recorded as the key's write. In that order, with no await
        between, so a write the day refuses does not take the key's second, and one the key's
        rate refuses is not charged."""
        rate = self._store.key_writes
        if not rate.allows(self.namespace_id, key):
            raise limits.KVError(op, key_rate.STATUS, key_rate.MESSAGE)
        self._spend(kind)
        rate.record(self.namespace_id, key)

    async def _call(
        self, op: str, method: str, args: list[Any], ctx: CallContext
    ) -> object | StreamReply:
        if not self._ready:
            if self._account is None:  # ember dev: a binding's namespace exists once used
                await self._store.write(
                    self._owner,
                    self._store.store.ensure_namespace,
                    self.namespace_id,
                    self._title,
                    None,
                )
            else:
                # A platform's namespaces are made (and deleted) by its control plane; a
                # binding must not bring a deleted one back, outside its account's quota and GC.
                await self._require_namespace(op)
            self._ready = True
        if method == "get":
            return await self._get(args)
        if method == "get_bulk":
            return await self._get_bulk(args)
        if method == "put":
            await self._put(args, ctx.upload)
            return None
        if method == "delete":
            (key,) = _arity(op, args, 1)
            self._admit_write(op, "deletes", limits.validate_key(op, key))
            await self._store.delete_many(self._owner, self.namespace_id, [key])
            return None
        return await self._list(args)

    async def _get(self, args: list[Any]) -> object | StreamReply:
        key, cache_ttl = _arity("GET", args, 2)
        limits.validate_key("GET", key)
        limits.validate_cache_ttl("GET", cache_ttl)
        self._spend("reads")
        entry = await self._store.get(self._owner, self.namespace_id, key)
        if entry is None:
            return [False, None, None]
        if len(entry.value) <= INLINE_VALUE_BYTES:
            return [True, entry.metadata, entry.value]
        return StreamReply(head=[True, entry.metadata, None], chunks=_chunks(entry))

    async def _get_bulk(self, args: list[Any]) -> object | StreamReply:
        """Up to 100 keys in one call (``get([...])``), values concatenated in key order."""
        keys, value_type, cache_ttl = _arity("GET_BULK", args, 3)
        keys = limits.validate_bulk_get("GET_BULK", keys, value_type)
        limits.validate_cache_ttl("GET_BULK", cache_ttl)
        self._spend("reads", len(keys))  # each key it names, as Cloudflare bills them
        heads: list[list[object]] = []
        values: list[bytes] = []
        for key in keys:
            entry = await self._store.get(self._owner, self.namespace_id, key)
            if entry is None:
                heads.append([False, None, 0])
                continue
            heads.append([True, entry.metadata, len(entry.value)])
            values.append(entry.value)
        total = sum(len(v) for v in values)
        if total > limits.MAX_BULK_GET_BYTES:
            raise limits.KVError(
                "GET_BULK",
                413,
                f"Total size of request exceeds the limit of "
                f"{limits.MAX_BULK_GET_BYTES // (1024 * 1024)}MB",
            )
        if total <= INLINE_VALUE_BYTES:
            return [heads, b"".join(values)]
        return StreamReply(head=[heads, None], chunks=_bulk_chunks(values))

    async def _put(self, args: list[Any], upload: AsyncIterator[bytes] | None) -> None:
        key, body, expiration, expiration_ttl, metadata = _arity("PUT", args, 5)
        limits.validate_key("PUT", key)
        expires = limits.resolve_expiration("PUT", self._clock(), expiration, expiration_ttl)
        metadata = limits.validate_metadata("PUT", metadata)
        if body is None:
            if upload is None:
                raise limits.KVError("PUT", 400, "no value was sent")
            body = await _read_upload(upload)
        elif not isinstance(body, bytes):
            raise limits.KVError("PUT", 400, "values must be strings, bytes or streams")
        limits.validate_value_length("PUT", len(body))
        self._admit_write("PUT", "writes", key)
        try:
            await self._store.put_many(
                self._owner,
                self.namespace_id,
                [KVWrite(key, body, expires, metadata)],
                quota=self._quota,
                pool=self._pool,  # its figures read on the store's thread, just before
                registered_only=self._account is not None,  # a platform's namespace
            )
        except KVQuotaExceeded as exc:
            raise limits.KVError("PUT", 413, str(exc)) from None
        except NotFound:
            raise self._gone("PUT") from None

    async def _require_namespace(self, op: str) -> None:
        try:
            await self._store.write(self._owner, self._store.store.get_namespace, self.namespace_id)
        except NotFound:
            raise self._gone(op) from None

    def _gone(self, op: str) -> limits.KVError:
        return limits.KVError(
            op,
            404,
            f"KV namespace {self.namespace_id!r} bound as {self.binding} does not exist "
            "(it was deleted); bind an existing namespace and deploy again",
        )

    async def _list(self, args: list[Any]) -> object:
        prefix, limit, cursor = _arity("LIST", args, 3)
        prefix = "" if prefix is None else prefix
        if not isinstance(prefix, str):
            raise limits.KVError("LIST", 400, "prefix must be a string")
        limits.validate_key_length("LIST", prefix)
        count = limits.validate_list_limit("LIST", limit)
        if cursor is not None and not isinstance(cursor, str):
            raise limits.KVError("LIST", 400, "cursor must be a string")
        cursor = limits.validate_cursor("LIST", cursor)
        self._spend("lists")
        page = await self._store.list(self.namespace_id, prefix=prefix, limit=count, cursor=cursor)
        keys = [info.as_listed() for info in page.keys]
        result: dict[str, object] = {"keys": keys, "list_complete": page.cursor is None}
        if page.cursor is not None:
            result["cursor"] = page.cursor
        result["cacheStatus"] = None
        return result


def _arity(op: str, args: list[Any], count: int) -> list[Any]:
    if not isinstance(args, list) or len(args) != count:
        raise limits.KVError(op, 400, f"expected {count} arguments")
    return args


async def _read_upload(upload: AsyncIterator[bytes]) -> bytes:
    """Read an uploaded value; past the limit keep counting (for the exact message), not storing."""
    parts: list[bytes] = []
    length = 0
    async for chunk in upload:
        length += len(chunk)
        if length <= limits.MAX_VALUE_BYTES:
            parts.append(chunk)
    limits.validate_value_length("PUT", length)
    return b"".join(parts)


async def _chunks(entry: KVEntry) -> AsyncIterator[bytes]:
    view = memoryview(entry.value)
    for start in range(0, len(view), STREAM_CHUNK_BYTES):
        yield bytes(view[start : start + STREAM_CHUNK_BYTES])


async def _bulk_chunks(values: list[bytes]) -> AsyncIterator[bytes]:
    for value in values:
        view = memoryview(value)
        for start in range(0, len(view), STREAM_CHUNK_BYTES):
            yield bytes(view[start : start + STREAM_CHUNK_BYTES])
