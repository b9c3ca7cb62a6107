"""The HTTP client's side of one ASGI request: its head, its body, and whether it is still there.

``request_head`` turns a parsed head into an ``HttpRequest`` (shared with the HTTP fast path,
``fasthttp.py``); ``AsgiClient`` reads the body (inline when small and announced, else streamed
with backpressure) and watches for the client going away. Separate from ``router.py``, which
decides what to do with a request and its response, so the ASGI receive side reads on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from ember.runtime.http import ClientDisconnected, HttpRequest

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
INLINE_BODY_BYTES = 64 * 1024


class AsgiClient:
    """The HTTP client's side of one request: its body, and whether it is still there."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._body_done = False
        self._watcher: asyncio.Future[None] | None = None
        self.disconnected = False
        self.inline_pending = False  # a small announced body is still to be read (read_inline)

    def request(self, scope: Scope) -> HttpRequest:
        """The request from its head; if ``inline_pending``, ``read_inline`` gives its body.

        Synchronous so that a request without a body (most) costs no task or timer here.
        """
        request, chunked = request_head(
            scope["method"],
            scope.get("scheme", "http"),
            scope.get("server"),
            scope.get("raw_path") or scope["path"].encode(),
            scope.get("query_string", b""),
            scope["headers"],
        )
        request.root_path = scope.get("root_path", "")
        length = request.content_length
        if length == 0 or (length is None and not chunked):
            self._body_done = True  # no body: the disconnect watcher will see the empty message
        elif length is not None and length <= INLINE_BODY_BYTES:
            self.inline_pending = True
        else:
            request.body = self._stream()
        return request

    def mark_body_read(self) -> None:
        """The request's body was read elsewhere (or there was none)."""
        self._body_done = True

    async def read_inline(self) -> bytes:
        """The whole (small, announced) body."""
        self.inline_pending = False
        parts = [chunk async for chunk in self._stream()]
        return b"".join(parts)

    async def _stream(self) -> AsyncIterator[bytes]:
        while not self._body_done:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                self._body_done = True
                raise ClientDisconnected()
            chunk = message.get("body", b"")
            if not message.get("more_body", False):
                self._body_done = True
            if chunk:
                yield chunk

    @property
    def body_done(self) -> bool:
        """True once the request body was read (or there was none)."""
        return self._body_done

    def start_watching(self, task: asyncio.Task[Any]) -> None:
        """Watch for a disconnect; on one, cancel ``task`` (the request's ASGI task)."""
        if self._watcher is None and self._body_done:
            self._watcher = asyncio.ensure_future(self._watch(task))

    def ensure_watching(self) -> None:
        """A streamed response may run for long: notice a disconnect (cancels this task)."""
        task = asyncio.current_task()
        if task is not None:
            self.start_watching(task)

    async def _watch(self, task: asyncio.Task[Any] | None) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                if task is not None and not task.done():
                    task.cancel()
                return

    def stop_watching(self) -> None:
        """The response is complete: stop listening for a disconnect."""
        if self._watcher is not None:
            self._watcher.cancel()


def request_head(
    method: str,
    scheme: str,
    server: tuple[str, int | None] | None,
    raw_path: bytes,
    query: bytes,
    raw_headers: Iterable[tuple[bytes, bytes]],
) -> tuple[HttpRequest, bool]:
    """The request (no body yet) from its parsed head, and whether its body is chunked."""
    headers: list[tuple[str, str]] = []
    host = None
    length: int | None = None
    chunked = False
    for raw_name, raw_value in raw_headers:
        name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        headers.append((name, value))
        if name == "host":
            host = value
        elif name == "content-length":
            length = _content_length(value)
        elif name == "transfer-encoding":
            chunked = True
    if host is None:
        server = server or ("localhost", None)
        host = f"{server[0]}:{server[1]}" if server[1] else server[0]
    url = f"{scheme}://{host}{raw_path.decode('latin-1')}"
    if query:
        url += "?" + query.decode("latin-1")
    return HttpRequest(method, url, headers, None, length), chunked


def _content_length(value: str) -> int | None:
    try:
        return max(0, int(value))
    except ValueError:
        return None
