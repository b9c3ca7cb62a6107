"""ASGI front of the supervisor: HTTP in, events to a deployment, HTTP out.

Owns the HTTP details the supervisor should not know: cancelling the request in its isolate and
its binding calls when the client goes away (the client's side, its head, body and disconnect,
is ``asgiclient.py``), streaming the response as the worker produces it, and the paths that run
a scheduled handler by hand (``ember dev`` only: Miniflare's always, wrangler's ``/__scheduled``
with ``--test-scheduled``).
``resolve`` picks the deployment for a request: ``ember dev`` always answers with its one
deployment; ``ember serve`` routes by host and path.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs

from ember.runtime import limits as L
from ember.runtime.asgiclient import AsgiClient, Receive, Scope
from ember.runtime.errorpage import platform_error_response
from ember.runtime.http import ClientDisconnected, HttpResponse, ResponseAborted
from ember.runtime.statusline import STATUS_TEXT
from ember.runtime.supervisor import Supervisor

Send = Callable[[dict[str, Any]], Awaitable[None]]
# A request still waiting for its response head after this long gets a disconnect watcher (a
# task reading ``receive``). Under load most requests wait a few milliseconds in queues, and a
# watcher each cost more than the rest of the router's work; a client that leaves is noticed
# within 2 * WATCH_AFTER_S instead, and a handler wastes at most that long.
WATCH_AFTER_S = 0.05
# Paths that run the scheduled handler. ``/__scheduled`` is wrangler's ``--test-scheduled``
# middleware (answers "Ran scheduled event"). The others are Miniflare's trigger handlers,
# current (v5) and older (answer the outcome, "ok" or the failure, or with ?format=json a
# {"outcome", "noRetry"} object); wrangler dev turns those on always (its Miniflare options set
# ``unsafeTriggerHandlers: true``), so ``ember dev`` serves them with or without the flag.
WRANGLER_SCHEDULED_PATH = "/__scheduled"
MINIFLARE_SCHEDULED_PATHS = ("/cdn-cgi/local/scheduled", "/cdn-cgi/handler/scheduled")
T = TypeVar("T")


class _Gone(Exception):
    """The client disconnected before the response head was ready."""


class Router:
    """An ASGI application in front of a Supervisor."""

    def __init__(
        self,
        supervisor: Supervisor,
        resolve: Callable[[Scope], str | None],
        *,
        test_scheduled: bool = False,
        trigger_handlers: bool = False,
        on_startup: Callable[[], Awaitable[None]] | None = None,
        on_shutdown: Callable[[], Awaitable[None]] | None = None,
        pending: Callable[[], Awaitable[None] | None] | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.resolve = resolve
        # The paths that run a scheduled handler here (none on ``ember serve``: there, as on
        # Cloudflare, every path is the worker's and only the schedule runs crons).
        self.scheduled_paths: frozenset[str] = frozenset(
            (
                *((WRANGLER_SCHEDULED_PATH,) if test_scheduled else ()),
                *(MINIFLARE_SCHEDULED_PATHS if trigger_handlers else ()),
            )
        )
        self.on_startup = on_startup
        self.on_shutdown = on_shutdown
        # What a request awaits before it is dispatched, if anything (``ember dev``: the reload
        # of files saved before it arrived, ``reload_gate.py``). A call, not a coroutine: the
        # usual answer is None, and costs no coroutine.
        self.pending = pending
        self._waiting: dict[asyncio.Task[Any], tuple[AsgiClient, float]] = {}
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the server's, once it runs

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
        if self.pending is not None and (wait := self.pending()) is not None:
            await wait
        deployment_id = self.resolve(scope)
        if deployment_id is None:
            await _send_plain(send, 404, b"No worker is deployed here.\n")
            return
        if scope["path"] in self.scheduled_paths:
            await self._scheduled(deployment_id, scope, send)
            return
        client = AsgiClient(receive)
        request = client.request(scope)
        if client.inline_pending:
            try:  # a body trickled in slower than the wall limit must not hold the request forever
                request.body = await asyncio.wait_for(
                    client.read_inline(), self._body_timeout(deployment_id)
                )
            except ClientDisconnected:
                return  # gone while its body was being read: nothing reached the worker
            except TimeoutError:
                await _send_response(send, platform_error_response(L.WALL_EXCEEDED), client)
                return
        # The usual case awaits the request's head future directly: two coroutines fewer.
        pending = self.supervisor.fetch_ready(deployment_id, request)
        try:
            if pending is not None:
                response = await self._unless_gone(client, pending.head, pending.client_gone)
            else:
                response = await self._unless_gone(
                    client, self.supervisor.fetch(deployment_id, request)
                )
        except _Gone:
            return  # the client left; the supervisor already cancelled the request's work
        await _respond(send, response, client)

    async def respond(self, receive: Receive, send: Send, response: HttpResponse) -> None:
        """Send ``response`` to a request whose body was read (or that had none).

        For the HTTP fast path (``fasthttp.py``): the responses it does not write itself.
        """
        client = AsgiClient(receive)
        client.mark_body_read()
        await _respond(send, response, client)

    def _body_timeout(self, deployment_id: str) -> float:
        deployment = self.supervisor.deployment(deployment_id)
        limits = deployment.limits if deployment is not None else L.Limits()
        return limits.wall_ms / 1000

    async def _unless_gone(
        self, client: AsgiClient, work: Awaitable[T], on_cancel: Callable[[], None] | None = None
    ) -> T:
        """Await ``work``, cancelling it if the client disconnects meanwhile (raises _Gone).

        ``on_cancel`` runs if the wait is cancelled (``work`` a future: nothing else would know).

        Most requests finish within a few milliseconds, so instead of a disconnect watcher per
        request (a task reading ``receive``), one sweep every WATCH_AFTER_S starts watchers for
        the requests still waiting.
        """
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)  # with the loop: no getpid syscall to find it
        assert task is not None  # invariant: called from the ASGI request task
        if client.body_done:
            self._waiting[task] = (client, time.monotonic())
            if self._sweep_timer is None:
                self._sweep_timer = loop.call_later(WATCH_AFTER_S, self._sweep)
        try:
            return await work
        except asyncio.CancelledError:
            if on_cancel is not None:
                on_cancel()
            if client.disconnected and task.uncancel() == 0:
                raise _Gone() from None
            raise
        finally:
            self._waiting.pop(task, None)

    def _sweep(self) -> None:
        self._sweep_timer = None
        horizon = time.monotonic() - WATCH_AFTER_S
        for task, (client, since) in list(self._waiting.items()):
            if since <= horizon:
                del self._waiting[task]
                client.start_watching(task)
        if self._waiting:
            self._sweep_timer = asyncio.get_running_loop().call_later(WATCH_AFTER_S, self._sweep)

    async def _scheduled(self, deployment_id: str, scope: Scope, send: Send) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        cron = query.get("cron", [""])[0]  # no ?cron=: an empty cron, as wrangler and Miniflare
        when = query.get("time", [None])[0]
        scheduled_time = float(when) if when and when.isdigit() else time.time() * 1000
        result = await self.supervisor.scheduled(deployment_id, cron, scheduled_time)
        status = 200 if result.outcome == "ok" else 500
        if scope["path"] != WRANGLER_SCHEDULED_PATH:
            if query.get("format", [""])[0] == "json":
                body = json.dumps({"outcome": result.outcome, "noRetry": False}).encode()
                await _send_plain(send, status, body, b"application/json")
            else:
                await _send_plain(send, status, result.outcome.encode())
        elif result.outcome == "ok":
            await _send_plain(send, 200, b"Ran scheduled event\n")
        else:
            body = f"Scheduled event failed: {result.message or result.outcome}\n{result.traceback}"
            await _send_plain(send, 500, body.encode())


async def _respond(send: Send, response: HttpResponse, client: AsgiClient) -> None:
    try:
        await _send_response(send, response, client)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if client.disconnected and task is not None and task.uncancel() == 0:
            return  # the client left mid-stream; the stream was closed on the way out
        raise


def _start(response: HttpResponse, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    start = {"type": "http.response.start", "status": response.status, "headers": headers}
    if response.status_text:  # the protocol writes it (statusline.py); else its own phrase
        start[STATUS_TEXT] = response.status_text
    return start


async def _send_response(send: Send, response: HttpResponse, client: AsgiClient) -> None:
    headers = [
        (k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
        for k, v in response.headers
    ]
    body = response.body
    if isinstance(body, bytes):
        client.stop_watching()
        headers.append((b"content-length", str(len(body)).encode()))
        await send(_start(response, headers))
        await send({"type": "http.response.body", "body": body})
        return
    stream: Any = body
    client.ensure_watching()
    await send(_start(response, headers))
    try:
        async for chunk in stream:
            if client.disconnected:
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        else:
            client.stop_watching()  # before the final send: it makes receive() return
            await send({"type": "http.response.body", "body": b""})
            return
    except ResponseAborted:
        # Ending cleanly would look complete to the client: abort the connection instead.
        raise
    finally:
        client.stop_watching()
        await stream.aclose()


async def _send_plain(
    send: Send, status: int, body: bytes, content_type: bytes = b"text/plain;charset=UTF-8"
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
