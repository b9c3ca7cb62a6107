"""Isolate side of a KV binding: ``env.KV.get/put/delete/list`` as Python Workers see them.

Accepts both the Python-style keywords (``expiration_ttl``) and the JavaScript option names
(``expirationTtl``, or an options dict as the second argument, as Pyodide passes them). Holds no
state; every operation is one call to the supervisor's ``KVService``, which validates it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Mapping
from typing import Any

from ember.bindings.base import BindingChannel, BindingSpec, ServiceError
from ember.bindings.jsdict import JsDict, to_jsdict
from ember.bindings.kv.limits import encode_metadata
from ember.bindings.streams import ReadableStream
from ember.js_errors import JsTypeError

TYPES = {"text", "json", "arrayBuffer", "bytes", "stream"}
# Values up to this size travel inside the call frame; larger ones are uploaded as a stream.
INLINE_PUT_BYTES = 256 * 1024


class KVNamespace:
    """``env.<BINDING>`` for a KV namespace."""

    def __init__(self, spec: BindingSpec, channel: BindingChannel) -> None:
        self._name = spec.name
        self._channel = channel

    def __repr__(self) -> str:
        return f"<KVNamespace {self._name}>"

    async def get(self, key: Any, type: Any = None, **options: Any) -> Any:
        """The value of ``key``: str, or per ``type`` json, arrayBuffer/bytes or stream.

        A list of up to 100 keys reads them all at once (as text or json): a dict of each key
        to its value, None where missing (the platform's ``Map``).
        """
        value_type, cache_ttl = _get_options(type, options)
        if isinstance(key, list | tuple):
            found = await self._get_bulk(list(key), value_type, cache_ttl)
            return {name: None if item is None else item[1] for name, item in found.items()}
        _, body = await self._get(key, value_type, cache_ttl)
        return body

    async def get_with_metadata(self, key: Any, type: Any = None, **options: Any) -> Any:
        """``{value, metadata, cacheStatus}`` for ``key``; for a list of keys, a dict of each
        key to ``{value, metadata}`` (None where missing)."""
        value_type, cache_ttl = _get_options(type, options)
        if isinstance(key, list | tuple):
            found = await self._get_bulk(list(key), value_type, cache_ttl)
            return {
                name: None if item is None else JsDict(value=item[1], metadata=item[0])
                for name, item in found.items()
            }
        metadata, body = await self._get(key, value_type, cache_ttl)
        return JsDict(value=body, metadata=metadata, cacheStatus=None)

    getWithMetadata = get_with_metadata  # noqa: N815 - the JavaScript name

    async def put(
        self, key: Any, value: Any, options: Mapping[str, Any] | None = None, **kw: Any
    ) -> None:
        """Store ``value`` (str, bytes or an async iterable of bytes) under ``key``."""
        merged = {**(options or {}), **kw}
        expiration = merged.pop("expiration", None)
        ttl = merged.pop("expiration_ttl", merged.pop("expirationTtl", None))
        metadata = merged.pop("metadata", None)
        if merged:
            raise JsTypeError(f"KV put() got unexpected options: {', '.join(sorted(merged))}")
        try:
            metadata_json = encode_metadata(metadata)
        except (TypeError, ValueError) as exc:
            raise JsTypeError(f"KV put() metadata must be JSON-serialisable: {exc}") from None
        upload: AsyncIterable[bytes] | bytes | None = None
        body: bytes | None
        if isinstance(value, str):
            body = value.encode("utf-8")
        elif isinstance(value, bytes | bytearray | memoryview):
            body = bytes(value)
        elif hasattr(value, "__aiter__"):
            body, upload = None, _bytes_only(value)
        else:
            raise JsTypeError(
                f"KV put() value must be a str, bytes or a stream, found {type_name(value)}"
                " (use json.dumps for objects)"
            )
        if body is not None and len(body) > INLINE_PUT_BYTES:
            body, upload = None, body
        await self._channel.call(
            self._name, "put", [_key(key), body, expiration, ttl, metadata_json], upload=upload
        )

    async def delete(self, key: Any) -> None:
        """Delete ``key`` (no error if it does not exist)."""
        await self._channel.call(self._name, "delete", [_key(key)])

    async def list(self, options: Mapping[str, Any] | None = None, **kw: Any) -> JsDict:
        """``{keys: [{name, expiration?, metadata?}], list_complete, cursor?}``."""
        merged = {**(options or {}), **kw}
        prefix = merged.pop("prefix", None)
        limit = merged.pop("limit", None)
        cursor = merged.pop("cursor", None)
        if merged:
            raise JsTypeError(f"KV list() got unexpected options: {', '.join(sorted(merged))}")
        reply = await self._channel.call(self._name, "list", [prefix, limit, cursor])
        return to_jsdict(reply.value)  # type: ignore[no-any-return]

    async def _get_bulk(
        self, keys: list[Any], value_type: str, cache_ttl: Any
    ) -> dict[str, tuple[Any, Any] | None]:
        """``{key: (metadata, value) or None}`` for a bulk read, in the keys' order."""
        for key in keys:
            _key(key)
        reply = await self._channel.call(self._name, "get_bulk", [keys, value_type, cache_ttl])
        heads, inline = reply.value  # type: ignore[misc]
        data = inline if reply.stream is None else await ReadableStream(reply.stream).read_all()
        result: dict[str, tuple[Any, Any] | None] = {}
        offset = 0
        for key, (found, metadata_json, length) in zip(keys, heads, strict=True):
            if not found:
                result[key] = None
                continue
            raw = bytes(data[offset : offset + length])
            offset += length
            text = raw.decode("utf-8", "replace")
            try:
                value = to_jsdict(json.loads(text)) if value_type == "json" else text
            except ValueError:
                raise ServiceError(
                    f"KV GET_BULK failed: 400 At least one of the requested keys corresponds "
                    f"to a non-{value_type} value",
                    kind="kv",
                    data={"status": 400},
                ) from None
            metadata = to_jsdict(json.loads(metadata_json)) if metadata_json else None
            result[key] = (metadata, value)
        return result

    async def _get(self, key: Any, value_type: str, cache_ttl: Any) -> tuple[Any, Any]:
        reply = await self._channel.call(self._name, "get", [_key(key), cache_ttl])
        found, metadata_json, inline = reply.value  # type: ignore[misc]
        metadata = to_jsdict(json.loads(metadata_json)) if metadata_json is not None else None
        if not found:
            return None, None
        if value_type == "stream":
            source = reply.stream if reply.stream is not None else inline
            return metadata, ReadableStream(source)
        data = inline
        if reply.stream is not None:
            data = await ReadableStream(reply.stream).read_all()
        if value_type in ("arrayBuffer", "bytes"):
            return metadata, bytes(data)
        text = bytes(data).decode("utf-8", "replace")
        if value_type == "json":
            return metadata, to_jsdict(json.loads(text))
        return metadata, text


def _get_options(value_type: Any, options: dict[str, Any]) -> tuple[str, Any]:
    if isinstance(value_type, Mapping):
        options = {**value_type, **options}
        value_type = None
    value_type = options.pop("type", value_type) or "text"
    cache_ttl = options.pop("cacheTtl", options.pop("cache_ttl", None))
    if options:
        raise JsTypeError(f"KV get() got unexpected options: {', '.join(sorted(options))}")
    if value_type not in TYPES:
        raise JsTypeError(
            'Unknown response type. Possible types are "text", "arrayBuffer", "json", and "stream".'
        )
    return value_type, cache_ttl


def _key(key: Any) -> Any:
    # Validation (and its exact messages) belongs to the service; only non-strings stop here.
    if not isinstance(key, str):
        raise JsTypeError(f"KV keys must be strings, found {type_name(key)}")
    return key


async def _bytes_only(stream: Any) -> Any:
    async for chunk in stream:
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        if not isinstance(chunk, bytes | bytearray | memoryview):
            raise JsTypeError(f"KV put() stream chunks must be bytes, found {type_name(chunk)}")
        yield bytes(chunk)


def type_name(value: object) -> str:
    """The class name of ``value`` for messages."""
    return type(value).__name__
