"""KV values over REST: the same store, limits and words as the workers' ``env.KV`` binding.

    PUT    .../values/{key}     raw body (wrangler), or multipart ``value`` + ``metadata`` (SDK)
    GET    .../values/{key}     the bare bytes (no envelope); 404 code 10009 when missing
    DELETE .../values/{key}
    GET    .../metadata/{key}   the key's metadata (JSON)
    GET    .../keys             ``?prefix=&limit=&cursor=`` with ``result_info.cursor``
    PUT    .../bulk             [{key, value, base64?, expiration?, expiration_ttl?, metadata?}]
    POST   .../bulk/delete      [key, ...] (also ``DELETE .../bulk``)
    POST   .../bulk/get         {keys: [...], type?: "text"|"json", withMetadata?: bool}

Keys arrive percent-decoded by the router (``dir%2Fk:1`` is the key ``dir/k:1``). Reads never
wait for writes, and an account's writes take their turn with every other account's on the
store's writer (``ember.bindings.kv.async_store``), with its workers' ``env.KV`` writes. Unlike
``env.KV``, REST writes are not held to one write per second per key: Cloudflare bounds them by
the REST API's own rate limit (``ember.bindings.kv.key_rate``). Every write is
acknowledged only after its commit; an account's writes are checked against its byte limit
(``platform.temporary`` or ``platform.accounts``) inside the same transaction. A bulk write or
delete is one transaction: one flush, and a refused item (invalid, or past the quota) refuses
the whole request, writing nothing. Every valid operation counts against the account's daily KV
allowances (``ember.bindings.kv.daily``; the workers' ``env.KV`` spends the same ones): each pair
of a bulk write, each key of a bulk read or delete, as Cloudflare bills them; past one the
request is refused whole (429, code 10048). Every item is checked before any is counted: one
refused as invalid (400, 414; a bulk request with an empty or over-long key) wrote, read or
deleted nothing and is not counted.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ember.bindings.kv import limits
from ember.bindings.kv.bulk import BulkItemError, bulk_keys, bulk_write
from ember.bindings.kv.daily import REST_MESSAGE, KVDailyLimitExceeded
from ember.bindings.kv.records import KVWrite
from ember.bindings.kv.store import KVQuota, KVQuotaExceeded
from ember.runtime.api.context import Caller, caller, json_body, plane_of, read_body
from ember.runtime.api.envelope import fail, ok
from ember.runtime.deployments.errors import DailyAllowanceSpent, InvalidRequest, KeyNotFound
from ember.runtime.deployments.multipart import parse_multipart

NAMESPACE = "/accounts/{account_id}/storage/kv/namespaces/{namespace_id}"
BODY_OVERHEAD = 64 * 1024  # multipart headers and the metadata part around the value
MAX_BULK = 10_000
# HTTP status of a refused KV operation -> the KV API's error code.
_CODES = {400: 10001, 404: 10009, 413: 10024, 414: 10001, 429: 10022}


def _namespace(request: Request) -> tuple[Caller, str]:
    who = caller(request)
    namespace = plane_of(request).namespaces.get(who.account, request.path_params["namespace_id"])
    return who, namespace.id


def _quota(request: Request, who: Caller) -> KVQuota | None:
    """The account's byte limit, and (a temporary account) the cap on what all temporary
    accounts store together (``temporary_total.py``)."""
    plane = plane_of(request)
    limits = plane.config.limits_for(who.account.temporary)
    if limits.max_kv_bytes is None:
        return None
    pool = plane.temporary_total.kv_pool() if who.account.temporary else None
    return KVQuota(who.account.id, limits.max_kv_bytes, limits.remedy("max_kv_bytes"), pool)


def _spend(request: Request, who: Caller, kind: str, count: int = 1) -> None:
    """Count ``count`` operations of ``kind`` against the account's daily allowance; past it
    ``DailyAllowanceSpent``, answered with the KV API's words (429, 10048)."""
    plane = plane_of(request)
    allowances = plane.config.limits_for(who.account.temporary).kv_allowances()
    try:
        plane.kv.daily.take(who.account.id, allowances, kind, count)
    except KVDailyLimitExceeded as exc:
        raise DailyAllowanceSpent(exc.limit, exc.observed, exc.maximum, REST_MESSAGE) from None


def _refused(exc: limits.KVError | KVQuotaExceeded) -> Response:
    if isinstance(exc, KVQuotaExceeded):
        return fail(413, 10024, str(exc))
    return fail(exc.status, _CODES.get(exc.status, 10001), str(exc))


def _int_query(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidRequest(f"query parameter {name} must be an integer, got {raw!r}") from None


async def put_value(request: Request) -> Response:
    who, namespace_id = _namespace(request)
    key = request.path_params["key"]
    body = await read_body(request, limits.MAX_VALUE_BYTES + BODY_OVERHEAD)
    value, metadata = _value_and_metadata(request.headers.get("content-type", ""), body)
    plane = plane_of(request)
    try:
        limits.validate_key("PUT", key)
        limits.validate_value_length("PUT", len(value))
        expires = limits.resolve_expiration(
            "PUT",
            plane.clock(),
            _int_query(request, "expiration"),
            _int_query(request, "expiration_ttl"),
        )
        metadata = limits.validate_metadata("PUT", metadata)
        _spend(request, who, "writes")  # once valid: a refused write wrote nothing
        await plane.kv.put(
            who.account.id,  # the account's turn on the writer, shared with its workers'
            namespace_id,
            key,
            value,
            expiration=expires,
            metadata=metadata,
            quota=_quota(request, who),
            registered_only=True,  # deleted meanwhile: refused, never written outside GC
        )
    except (limits.KVError, KVQuotaExceeded) as exc:
        return _refused(exc)
    return ok({})


def _value_and_metadata(content_type: str, body: bytes) -> tuple[bytes, str | None]:
    """A raw body is the value; a multipart one has parts ``value`` and optional ``metadata``."""
    if not content_type.lower().startswith("multipart/form-data"):
        return body, None
    parts = {part.name: part for part in parse_multipart(body, content_type)}
    if "value" not in parts:
        raise InvalidRequest("the multipart KV write has no 'value' part")
    metadata = parts.get("metadata")
    text = metadata.data.decode("utf-8", "replace") if metadata is not None else None
    return parts["value"].data, text


async def get_value(request: Request) -> Response:
    who, namespace_id = _namespace(request)
    key = request.path_params["key"]
    plane = plane_of(request)
    try:
        limits.validate_key("GET", key)
    except limits.KVError as exc:
        return _refused(exc)
    _spend(request, who, "reads")
    entry = await plane.kv.get(who.account.id, namespace_id, key)
    if entry is None:
        raise KeyNotFound(key)
    headers = {"expiration": str(entry.expiration)} if entry.expiration else {}
    return Response(entry.value, media_type="application/octet-stream", headers=headers)


async def get_metadata(request: Request) -> Response:
    who, namespace_id = _namespace(request)
    key = request.path_params["key"]
    plane = plane_of(request)
    try:
        limits.validate_key("GET", key)
    except limits.KVError as exc:
        return _refused(exc)
    _spend(request, who, "reads")
    entry = await plane.kv.get(who.account.id, namespace_id, key)
    if entry is None:
        raise KeyNotFound(key)
    return ok(json.loads(entry.metadata) if entry.metadata else None)


async def delete_value(request: Request) -> Response:
    who, namespace_id = _namespace(request)
    key = request.path_params["key"]
    plane = plane_of(request)
    try:
        limits.validate_key("DELETE", key)
    except limits.KVError as exc:
        return _refused(exc)
    _spend(request, who, "deletes")
    await plane.kv.delete_many(who.account.id, namespace_id, [key])
    return ok({})


async def list_keys(request: Request) -> Response:
    who, namespace_id = _namespace(request)
    plane = plane_of(request)
    prefix = request.query_params.get("prefix", "")
    cursor = request.query_params.get("cursor") or None
    try:
        count = limits.validate_list_limit("LIST", _int_query(request, "limit"))
        limits.validate_key_length("LIST", prefix)
        cursor = limits.validate_cursor("LIST", cursor)
    except limits.KVError as exc:
        return _refused(exc)
    _spend(request, who, "lists")
    page = await plane.kv.list(namespace_id, prefix=prefix, limit=count, cursor=cursor)
    keys: list[dict[str, Any]] = []
    for info in page.keys:
        item: dict[str, Any] = {"name": info.name}
        if info.expiration is not None:
            item["expiration"] = info.expiration
        if info.metadata is not None:
            item["metadata"] = json.loads(info.metadata)
        keys.append(item)
    return ok(keys, result_info={"count": len(keys), "cursor": page.cursor or ""})


async def bulk_put(request: Request) -> Response:
    who, namespace_id = _namespace(request)
    plane = plane_of(request)
    items = await _bulk_list(request)
    # Every item is checked before anything is written, and all are written in one
    # transaction: Cloudflare refuses an invalid bulk request as a whole (its
    # ``unsuccessful_keys`` are keys a storage backend failed to take, to retry).
    writes: list[KVWrite] = []
    try:
        for index, item in enumerate(items):
            writes.append(bulk_write(plane.clock(), index, item))
        _spend(request, who, "writes", len(writes))
        await plane.kv.put_many(
            who.account.id,
            namespace_id,
            writes,
            quota=_quota(request, who),
            registered_only=True,
        )
    except BulkItemError as exc:
        raise InvalidRequest(str(exc)) from None
    except (limits.KVError, KVQuotaExceeded) as exc:
        return _refused(exc)  # nothing of the request was written
    return ok({"successful_key_count": len(writes), "unsuccessful_keys": []})


async def bulk_delete(request: Request) -> Response:
    who, namespace_id = _namespace(request)
    plane = plane_of(request)
    try:
        keys = bulk_keys("DELETE", await _bulk_list(request))  # every key before any charge
    except BulkItemError as exc:
        raise InvalidRequest(f"bulk delete takes a JSON list of key names; {exc}") from None
    except limits.KVError as exc:
        return _refused(exc)  # nothing deleted, nothing charged
    _spend(request, who, "deletes", len(keys))
    await plane.kv.delete_many(who.account.id, namespace_id, keys)  # one transaction
    return ok({"successful_key_count": len(keys), "unsuccessful_keys": []})


async def bulk_get(request: Request) -> Response:
    who, namespace_id = _namespace(request)
    plane = plane_of(request)
    body = await json_body(request)
    keys = body.get("keys") if isinstance(body, dict) else None
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or not keys:
        raise InvalidRequest('expected {"keys": ["k1", ...]} (1 to 100 keys)')
    if len(keys) > 100:
        raise InvalidRequest(f"bulk get takes at most 100 keys, got {len(keys)}")
    try:
        bulk_keys("GET", keys)  # every key before any charge
    except limits.KVError as exc:
        return _refused(exc)  # nothing read, nothing charged
    _spend(request, who, "reads", len(keys))
    as_json = body.get("type") == "json"
    with_metadata = bool(body.get("withMetadata"))
    values: dict[str, Any] = {}
    for key in keys:
        entry = await plane.kv.get(who.account.id, namespace_id, key)
        value: Any = None
        if entry is not None:
            text = entry.value.decode("utf-8", "replace")
            value = _stored_json(key, text) if as_json else text
        if with_metadata:
            metadata = json.loads(entry.metadata) if entry and entry.metadata else None
            value = {"value": value, "metadata": metadata}
        values[key] = value
    return ok({"values": values})


def _stored_json(key: str, text: str) -> Any:
    """A stored value read with ``type: "json"``: one that is not JSON is the caller's 400."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidRequest(
            f'the value of key {key!r:.600} is not valid JSON; read it with "type": "text"'
        ) from None


async def _bulk_list(request: Request) -> list[Any]:
    body = await json_body(request)
    if not isinstance(body, list):
        raise InvalidRequest("expected a JSON list")
    if len(body) > MAX_BULK:
        raise InvalidRequest(f"a bulk request takes at most {MAX_BULK} items, got {len(body)}")
    return body


ROUTES = [
    Route(NAMESPACE + "/values/{key:path}", put_value, methods=["PUT"]),
    Route(NAMESPACE + "/values/{key:path}", get_value, methods=["GET"]),
    Route(NAMESPACE + "/values/{key:path}", delete_value, methods=["DELETE"]),
    Route(NAMESPACE + "/metadata/{key:path}", get_metadata, methods=["GET"]),
    Route(NAMESPACE + "/keys", list_keys, methods=["GET"]),
    Route(NAMESPACE + "/bulk", bulk_put, methods=["PUT"]),
    Route(NAMESPACE + "/bulk", bulk_delete, methods=["DELETE"]),
    Route(NAMESPACE + "/bulk/delete", bulk_delete, methods=["POST"]),
    Route(NAMESPACE + "/bulk/get", bulk_get, methods=["POST"]),
]
