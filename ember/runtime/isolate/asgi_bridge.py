"""Serve an ASGI application (FastAPI, Starlette, Quart...) from a fetch handler, as Python
Workers' ``asgi`` module does::

    import asgi                                   # or: from workers import asgi

    class Default(WorkerEntrypoint):
        async def fetch(self, request):
            return await asgi.fetch(app, request, self.env)

    Default = asgi.entrypoint(app)                # the same, in one line

As on the platform: each request runs one lifespan cycle (startup before the app sees it,
shutdown once its body is sent); ``scope["env"]`` carries the bindings (FastAPI:
``env = Depends(asgi.env)``) and ``scope["state"]`` a copy of the lifespan state; the request
body is read before the app starts; a body sent in one message is one response, and a body
sent in parts (``more_body``) is streamed to the client as the app produces it. An exception
before the app answers is the handler's exception (the dev error page shows it); one raised
after a whole response (Starlette's and FastAPI's error middleware send their 500, then
re-raise) leaves that response and prints the traceback to the worker's log, as uvicorn does;
one raised mid-stream cuts the stream, so the client sees an incomplete body, not a clean end.
"""

from __future__ import annotations

import asyncio
import sys
import traceback
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote, urlsplit

from ember.runtime.isolate.api import NULL_BODY_STATUSES, Request, Response
from ember.runtime.isolate.headers import Headers
from ember.runtime.isolate.scope import current_scope

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Message, Receive, Send], Awaitable[None]]

ASGI_VERSIONS = {"spec_version": "2.3", "version": "3.0"}


class ClientDisconnected(OSError):
    """Raised by ``send`` once the client stopped reading a streamed body."""


class LifespanFailed(RuntimeError):
    """The app reported ``lifespan.startup.failed`` (its message is this error's)."""


def http_scope(request: Request, env: Any, state: dict[str, Any] | None) -> dict[str, Any]:
    """The ASGI HTTP connection scope of ``request``.

    Header names and values are bytes as ASGI requires: latin-1, the encoding the router
    decoded them with, so every byte the client sent reaches the app unchanged.
    """
    url = urlsplit(request.url)
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": ASGI_VERSIONS,
        "http_version": "1.1",
        "method": request.method,
        "scheme": url.scheme or "http",
        "path": unquote(url.path or "/"),
        "raw_path": (url.path or "/").encode("latin-1", "replace"),
        "query_string": url.query.encode("latin-1", "replace"),
        "root_path": "",
        "headers": [
            (name.encode("latin-1", "replace"), value.encode("latin-1", "replace"))
            for name, value in request.headers.items()
        ],
        "server": (url.hostname or "localhost", url.port or (443 if url.scheme == "https" else 80)),
        "env": env,
    }
    if state is not None:
        scope["state"] = dict(state)  # ASGI: a shallow copy of the lifespan state per request
    return scope


class Lifespan:
    """One startup/shutdown cycle of an app; apps without lifespan support are served anyway."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._started: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._stopped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.state: dict[str, Any] = {}
        self._task: asyncio.Task[None] | None = None

    async def startup(self) -> None:
        """Run the app's startup; raises ``LifespanFailed`` if the app says it failed."""
        await self._inbox.put({"type": "lifespan.startup"})
        self._task = asyncio.ensure_future(self._run())
        await self._started

    async def shutdown(self) -> None:
        """Run the app's shutdown (nothing if it never acknowledged startup)."""
        if not self._started.done() or not self._started.result():
            return
        await self._inbox.put({"type": "lifespan.shutdown"})
        await self._stopped

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": ASGI_VERSIONS, "state": self.state}
        try:
            await self._app(scope, self._inbox.get, self._send)
        except Exception:
            # ASGI: an app that raises before acknowledging startup has no lifespan support.
            # One that raises after reporting a failure has already said what went wrong.
            if self._started.done():
                self._settle(self._stopped, None)
                return
        self._settle(self._started, False)  # returned without a word: no lifespan support
        self._settle(self._stopped, None)

    async def _send(self, message: Message) -> None:
        kind = message.get("type")
        if kind == "lifespan.startup.complete":
            self._settle(self._started, True)
        elif kind == "lifespan.startup.failed":
            failure = LifespanFailed(message.get("message") or "ASGI lifespan startup failed")
            if not self._started.done():
                self._started.set_exception(failure)
        elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            self._settle(self._stopped, None)
        else:
            raise RuntimeError(f"unexpected ASGI lifespan message type {kind!r}")

    @staticmethod
    def _settle(future: asyncio.Future[Any], value: Any) -> None:
        if not future.done():
            future.set_result(value)


class _BodyPipe:
    """Body parts from the app's ``send`` to the client, one at a time (backpressure: ``send``
    returns once the client side has taken the part, as a stream writer's ``write`` does)."""

    def __init__(self) -> None:
        self._parts: deque[bytes] = deque()
        self._readable = asyncio.Event()
        self._taken = asyncio.Event()
        self.ended = False
        self.closed = False  # the client side stopped reading (gone, or the body was dropped)
        self.failure: BaseException | None = None

    async def write(self, part: bytes, more: bool) -> None:
        if self.closed:
            # As uvicorn does: an app streaming forever learns the client left from ``send``.
            raise ClientDisconnected("the client closed the connection")
        if self.ended:
            return
        if part:
            self._parts.append(part)
        self.ended = not more
        self._readable.set()
        if self._parts and not self.ended:
            self._taken.clear()
            await self._taken.wait()

    def fail(self, error: BaseException) -> None:
        self.failure, self.ended = error, True
        self._readable.set()

    async def parts(self, on_close: Callable[[], None]) -> AsyncIterator[bytes]:
        try:
            while True:
                while self._parts:
                    yield self._parts.popleft()
                if self.failure is not None:
                    raise RuntimeError(
                        "the ASGI application failed while streaming its response"
                    ) from self.failure
                if self.ended:
                    return
                self._taken.set()
                self._readable.clear()
                await self._readable.wait()
        finally:
            self.closed = True
            self._taken.set()
            on_close()


class _Exchange:
    """One request through the app: its ``receive`` and ``send``, and the Response they make."""

    def __init__(self, body: bytes) -> None:
        self._request_body: deque[bytes] = deque([body])
        self.response: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self.finished = asyncio.Event()  # the response was sent in full, or the client left
        self._status = 200
        self._headers: list[tuple[str, str]] = []
        self._started = False
        self.pipe: _BodyPipe | None = None

    async def receive(self) -> Message:
        if self._request_body:
            return {
                "type": "http.request",
                "body": self._request_body.popleft(),
                "more_body": False,
            }
        await self.finished.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        kind = message.get("type")
        if kind == "http.response.start":
            if self._started:
                raise RuntimeError("the ASGI application sent http.response.start twice")
            self._started = True
            self._status = int(message["status"])
            self._headers = [
                (bytes(name).decode("latin-1"), bytes(value).decode("latin-1"))
                for name, value in message.get("headers", [])
            ]
        elif kind == "http.response.body":
            if not self._started:
                raise RuntimeError("the ASGI application sent a body before http.response.start")
            await self._body(bytes(message.get("body", b"")), bool(message.get("more_body", False)))
        # Other messages (http.response.trailers, pathsend...) are extensions ember does not
        # announce in the scope; an app that sends them anyway is ignored, as servers do.

    async def _body(self, part: bytes, more: bool) -> None:
        if self.pipe is not None:
            await self.pipe.write(part, more)
            if not more:
                self.finished.set()
            return
        if self.response.done():
            return  # the client is gone or the response is complete: nothing more to send
        headers = Headers._from_pairs(self._headers)
        if self._status in NULL_BODY_STATUSES:
            self.response.set_result(Response(None, status=self._status, headers=headers))
            self.finished.set()
        elif not more:
            self.response.set_result(Response(part, status=self._status, headers=headers))
            self.finished.set()
        else:
            self.pipe = _BodyPipe()
            self.response.set_result(
                Response(self.pipe.parts(self.finished.set), status=self._status, headers=headers)
            )
            await self.pipe.write(part, more)


async def fetch(app: ASGIApp, request: Request, env: Any = None, ctx: Any = None) -> Response:
    """Serve ``request`` with the ASGI ``app``; ``env`` becomes ``scope["env"]``."""
    if not isinstance(request, Request):
        raise TypeError(f"asgi.fetch expects the handler's request, found {type(request).__name__}")
    lifespan = Lifespan(app)
    await lifespan.startup()
    exchange = _Exchange(await request.bytes())

    async def run_app() -> None:
        try:
            await app(http_scope(request, env, lifespan.state), exchange.receive, exchange.send)
            if not exchange.response.done():
                raise RuntimeError("The ASGI application did not generate a response")
            if exchange.pipe is not None and not exchange.pipe.ended and not exchange.pipe.closed:
                raise RuntimeError("The ASGI application returned before its response body ended")
        except Exception as error:
            if not exchange.response.done():
                exchange.response.set_exception(error)
            elif exchange.pipe is not None:
                exchange.pipe.fail(error)
            else:
                # The app answered, then raised: Starlette's and FastAPI's error middleware
                # sends its 500 and re-raises. That 500 is the response (as under uvicorn and
                # on the platform); the traceback goes to the worker's log, as uvicorn prints it.
                print("Exception in ASGI application", file=sys.stderr)
                traceback.print_exception(error, file=sys.stderr)
        finally:
            exchange.finished.set()
            await lifespan.shutdown()

    task = asyncio.ensure_future(run_app())
    try:
        response = await asyncio.shield(exchange.response)
    except BaseException:
        await asyncio.gather(task, return_exceptions=True)
        raise
    if not task.done():
        # A streamed body, background tasks, the lifespan's shutdown: the app goes on after
        # the handler returns.
        (ctx or current_scope().ctx).wait_until(task)
    return response


def env_dependency() -> Any:
    """FastAPI's ``Depends`` that gives a path operation the bindings: ``env = Depends(asgi.env)``
    is written ``env=asgi.env`` on the platform, so ``asgi.env`` is this dependency itself."""
    from fastapi import Depends
    from fastapi import Request as FastAPIRequest

    async def env(request: FastAPIRequest) -> Any:
        return request.scope["env"]

    # This module's annotations are strings (``from __future__``) that FastAPI would look up
    # in its globals, where FastAPIRequest is not: give it the class itself.
    env.__annotations__ = {"request": FastAPIRequest}
    return Depends(env)


def entrypoint(app: ASGIApp) -> type:
    """A ``Default`` WorkerEntrypoint class that serves every request with ``app``."""
    from ember.runtime.isolate.entrypoints import WorkerEntrypoint

    class Default(WorkerEntrypoint):
        async def fetch(self, request: Request) -> Response:
            return await fetch(app, request, self.env, self.ctx)

    return Default


async def websocket(app: ASGIApp, request: Request, env: Any = None) -> Response:
    """WebSocket upgrades through ASGI: not served by ember yet (no WebSocket responses)."""
    raise TypeError("WebSocket responses are not supported by ember yet (asgi.websocket)")
