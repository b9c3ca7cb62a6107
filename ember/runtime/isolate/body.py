"""The body that Request and Response share: set once from str/bytes/streams, read once.

``clone()`` of a streamed body tees it (``ReadableStream.tee``), as JS does: a fetched response
can be read twice (``resp.clone()`` for a cache, then the original).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from typing import Any

from ember.bindings.jsdict import to_jsdict
from ember.bindings.streams import ReadableStream
from ember.runtime.isolate.buffers import ArrayBuffer
from ember.runtime.isolate.encoding import EncodedBody
from ember.runtime.isolate.formdata import FormData, parse_form
from ember.runtime.isolate.headers import Headers
from ember.runtime.mux import InStream

BodyInit = str | bytes | bytearray | memoryview | AsyncIterable[Any] | Iterable[Any] | None
_TEXT_PLAIN = ("content-type", "text/plain;charset=UTF-8")


class _Body:
    """Shared body handling of Request and Response (a body can be read once)."""

    _body: bytes | AsyncIterable[Any] | None
    _body_used: bool

    def _init_body(self, body: Any, headers: Headers) -> None:
        self._body_used = False
        if body is None:
            self._body = None
        elif isinstance(body, str):
            self._body = body.encode("utf-8")
            if not headers._items:  # no headers given (the usual case): nothing to look up
                headers._items.append(_TEXT_PLAIN)
            elif not headers.has("content-type"):
                headers.append(*_TEXT_PLAIN)
        elif isinstance(body, bytes | bytearray | memoryview):
            self._body = bytes(body)
        elif isinstance(body, _Body):
            self._body = body._take_body()
        elif hasattr(body, "__aiter__"):
            self._body = body
        elif isinstance(body, Mapping):
            raise TypeError("a dict cannot be a body: use Response.json(data) or json.dumps(data)")
        elif isinstance(body, Iterable):
            self._body = _iterate_sync(body)
        else:
            raise TypeError(f"unsupported body type {type(body).__name__}")

    def _body_for_clone(self) -> bytes | AsyncIterable[Any] | None:
        """A body for a copy: the same bytes, or one branch of a tee of the stream (this one
        keeps the other), as JS ``clone()`` does."""
        if self._body_used:
            raise TypeError("Body has already been used. It can only be used once.")
        if self._body is None or isinstance(self._body, bytes):
            return self._body
        stream = self._body if isinstance(self._body, ReadableStream) else None
        mine, theirs = (stream or ReadableStream(_as_bytes(self._body))).tee()
        self._body = mine
        return theirs

    def _take_body(self) -> bytes | AsyncIterable[Any] | None:
        if self._body_used:
            raise TypeError("Body has already been used. It can only be used once.")
        self._body_used = True
        return self._body

    @property
    def body(self) -> ReadableStream | None:
        """The body as a stream (None if there is none)."""
        if self._body is None:
            return None
        if isinstance(self._body, bytes):
            return ReadableStream(self._body)
        if not isinstance(self._body, ReadableStream):
            # One stream over the source itself, as JS's `body` is one object: handed back
            # unread (`Response(resp.body, ...)`) it is still the supervisor's stream, which
            # then goes to the client as is (with the upstream's length), not through here.
            raw = isinstance(self._body, InStream | EncodedBody)
            source = self._body if raw else _as_bytes(self._body)
            self._body = ReadableStream(source)  # type: ignore[arg-type]
        return self._body

    @property
    def body_used(self) -> bool:
        """True once the body was read."""
        return self._body_used

    bodyUsed = body_used  # noqa: N815 - the JavaScript name

    async def bytes(self) -> bytes:
        """The whole body."""
        body = self._take_body()
        if body is None:
            return b""
        if isinstance(body, bytes):
            return body
        return b"".join([chunk async for chunk in _as_bytes(body)])

    async def arrayBuffer(self) -> ArrayBuffer:  # noqa: N802 - the JavaScript name
        """The whole body: bytes that also answer Pyodide's ``.to_bytes()`` / ``.to_py()``."""
        return ArrayBuffer(await self.bytes())

    array_buffer = arrayBuffer

    async def text(self) -> str:
        """The body decoded as UTF-8."""
        return (await self.bytes()).decode("utf-8", "replace")

    async def json(self) -> Any:
        """The body parsed as JSON; objects allow attribute access (``data.name``)."""
        return await self._read_json()

    async def _read_json(self) -> Any:
        return to_jsdict(json.loads(await self.bytes()))

    async def form_data(self) -> FormData:
        """The body as a form (urlencoded or multipart), per its Content-Type header."""
        headers: Headers = self._headers  # type: ignore[attr-defined]
        return parse_form(await self.bytes(), headers.get("content-type"))

    formData = form_data  # noqa: N815 - the JavaScript name
    buffer = arrayBuffer  # Python Workers' name for the whole body


async def _as_bytes(source: AsyncIterable[Any]) -> AsyncIterator[bytes]:
    async for chunk in source:
        if isinstance(chunk, str):
            yield chunk.encode("utf-8")
        elif isinstance(chunk, bytes | bytearray | memoryview):
            yield bytes(chunk)
        else:
            raise TypeError(f"body chunks must be bytes or str, found {type(chunk).__name__}")


async def _iterate_sync(source: Iterable[Any]) -> AsyncIterator[Any]:
    for chunk in source:
        yield chunk
