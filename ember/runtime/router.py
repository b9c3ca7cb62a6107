"""ASGI front of the supervisor: HTTP in, events to a deployment, HTTP out.

Owns the HTTP details the supervisor should not know: building the request URL, reading the
body (inline when small and announced, else streamed with backpressure), watching for the client
going away (which cancels the request in its isolate and its binding calls), streaming the
response as the worker produces it, and ``/__scheduled`` when ``--test-scheduled`` is on.
``resolve`` picks the deployment for a request: ``ember dev`` always answers with its one
deployment; ``ember serve`` routes by host and path.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from ember.runtime.http import ClientDisconnected, HttpRequest, HttpResponse, ResponseAborted
from ember.runtime.supervisor import Supervisor

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
INLINE_BODY_BYTES = 64 * 1024


class Router:
    """An ASGI application in front of a Supervisor."""

    def __init__(
        self,
        supervisor: Supervisor,
        resolve: Callable[[Scope], str | None],
        *,
        test_scheduled: bool = False,
        on_startup: Callable[[], Awaitable[None]] | None = None,
        on_shutdown: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.resolve = resolve
        self.test_scheduled = test_scheduled
        self.on_startup = on_startup
        self.on_shutdown = on_shutdown

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    if self.on_startup is not None:
                        await self.on_startup()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.on_shutdown is not None:
                    await self.on_shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        deployment_id = self.resolve(scope)
        if deployment_id is None:
            await _send_plain(send, 404, b"No worker is deployed here.\n")
            return
        if self.test_scheduled and scope["path"] in ("/__scheduled", "/cdn-cgi/handler/scheduled"):
            await self._scheduled(deployment_id, scope, send)
            return
        client = _Client(receive)
        request = await client.request(scope)
        fetch = asyncio.ensure_future(self.supervisor.fetch(deployment_id, request))
        if not await client.wait_or_disconnect(fetch):
            return
        response = fetch.result()
        await _send_response(send, response, client)

    async def _scheduled(self, deployment_id: str, scope: Scope, send: Send) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        cron = query.get("cron", ["* * * * *"])[0]
        when = query.get("time", [None])[0]
        scheduled_time = float(when) if when and when.isdigit() else time.time() * 1000
        result = await self.supervisor.scheduled(deployment_id, cron, scheduled_time)
        if result.outcome == "ok":
            await _send_plain(send, 200, b"Ran scheduled event\n")
        else:
            body = f"Scheduled event failed: {result.message or result.outcome}\n{result.traceback}"
            await _send_plain(send, 500, body.encode())


class _Client:
    """The HTTP client's side of one request: its body, and whether it is still there."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._body_done = False
        self._watcher: asyncio.Future[None] | None = None
        self.disconnected = False

    async def request(self, scope: Scope) -> HttpRequest:
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        host = next((v for k, v in headers if k == "host"), None)
        if host is None:
            server = scope.get("server") or ("localhost", None)
            host = f"{server[0]}:{server[1]}" if server[1] else server[0]
        path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"")
        url = f"{scope.get('scheme', 'http')}://{host}{path.decode('latin-1')}"
        if query:
            url += "?" + query.decode("latin-1")
        length = _content_length(headers)
        chunked = any(k == "transfer-encoding" for k, _ in headers)
        body: bytes | AsyncIterator[bytes] | None = None
        if length == 0 or (length is None and not chunked):
            self._body_done = True  # no body: the disconnect watcher will see the empty message
        elif length is not None and length <= INLINE_BODY_BYTES:
            body = await self._read_all()
        else:
            body = self._stream()
        return HttpRequest(scope["method"], url, headers, body, length)

    async def _read_all(self) -> bytes:
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

    async def wait_or_disconnect(self, work: asyncio.Future[Any]) -> bool:
        """Wait for ``work``; False (and ``work`` cancelled) if the client left first."""
        try:
            if not self._body_done:
                await asyncio.shield(work)  # the body pump notices a disconnect itself
                return True
            self._watcher = asyncio.ensure_future(self._watch())
            done, _ = await asyncio.wait((work, self._watcher), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            raise
        if work in done:
            return True
        work.cancel()
        with contextlib.suppress(BaseException):
            await work
        return False

    async def _watch(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                return

    def stop_watching(self) -> None:
        """The response is complete: stop listening for a disconnect."""
        if self._watcher is not None:
            self._watcher.cancel()


async def _send_response(send: Send, response: HttpResponse, client: _Client) -> None:
    headers = [
        (k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
        for k, v in response.headers
    ]
    body = response.body
    if isinstance(body, bytes):
        client.stop_watching()
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    stream: Any = body
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    try:
        async for chunk in stream:
            if client.disconnected:
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        else:
            await send({"type": "http.response.body", "body": b""})
            return
    except ResponseAborted:
        # Ending cleanly would look complete to the client: abort the connection instead.
        raise
    finally:
        client.stop_watching()
        await stream.aclose()


async def _send_plain(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain;charset=UTF-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _content_length(headers: list[tuple[str, str]]) -> int | None:
    for name, value in headers:
        if name == "content-length":
            try:
                return max(0, int(value))
            except ValueError:
                return None
    return None
