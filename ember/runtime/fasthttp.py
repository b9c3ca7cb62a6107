"""``ember dev``'s HTTP fast path: uvicorn's httptools protocol, without ASGI for the usual request.

uvicorn runs every request as an ASGI application task: a scope dict, a ``RequestResponseCycle``,
an ``asyncio.Event``, a task and its coroutines, and a ``transport.write`` per message (head,
each chunk, the end). Measured, that machinery is most of what ``ember dev``'s supervisor spends
per request beyond the bare app. For the usual request (HTTP/1.1, not HEAD, to a ready isolate,
with no body or a small announced one that arrived with its head: an ``env.AI.run`` POST) this
protocol sends the Request frame from the parser's callbacks. When the response head arrives,
an inline body is written whole in one ``transport.write`` from the head future's callback (no
task, no coroutine, no scope), and a streamed one (a piped binding stream, the worker's own
stream) by one task, chunked, as ``faststream.py`` describes.

Everything else is uvicorn's own code and the ``Router``, unchanged, and that is the reference
(``tests/runtime/test_fasthttp.py`` and ``test_fasthttp_streams.py`` send the same random
requests through both and compare the bytes on the wire): a chunked or large body, or one that
did not all come with its head (handed over with what arrived of it), HEAD, HTTP/1.0, upgrades,
``Expect``, the paths of binding mounts (``mounted``), no isolate ready (the router's general
path), the paths that run a scheduled handler, and responses the fast writers do not handle
(headers that uvicorn interprets: content-length, transfer-encoding, connection; invalid header
bytes; 204 and 304 with a stream; a paused transport) go through a ``RequestResponseCycle`` and
the router's ``respond``, as they would have. Pipelined requests wait behind a fast one exactly
as behind a cycle (uvicorn's queue). One difference, on purpose: a client that disconnects while
its fast request waits or streams cancels it at once (``connection_lost``) rather than at the
router's next disconnect sweep (within 100 ms).

The protocol relies on uvicorn's ``HttpToolsProtocol`` internals (``cycle``, ``pipeline``,
``flow``, ``tasks``, ``_start_asgi_task``, ``on_response_complete``); ``fast_protocol`` returns
None (and ``ember dev`` uses uvicorn's default) for a uvicorn version it was not checked against.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import uvicorn
from httptools import HttpParserInvalidURLError, parse_url
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from ember.runtime.asgiclient import INLINE_BODY_BYTES, request_head
from ember.runtime.connguard import ConnectionGate
from ember.runtime.fasthead import EncodedHead, HeadCache, encode_head
from ember.runtime.fastrequest import FastRequest
from ember.runtime.faststream import ChunkedBody
from ember.runtime.http import HttpResponse
from ember.runtime.httphead import BoundedHeadProtocol
from ember.runtime.router import Router

# The uvicorn releases whose HttpToolsProtocol this subclass was read against and tested with.
CHECKED_UVICORN = ("0.55.",)


def fast_protocol(
    router: Router,
    deployment_id: Callable[[], str],
    mounted: Callable[[str], bool] | None = None,
    *,
    stale: Callable[[], bool] | None = None,
    gate: ConnectionGate | None = None,
) -> Any | None:
    """The protocol factory for ``uvicorn.Config(http=...)``; None if uvicorn is unknown.

    ``mounted(path)``: the path belongs to a binding's HTTP mount (``mounts.py``), which the
    ASGI app in front of the router serves: such requests take uvicorn's path. ``stale()``:
    the request must wait for a reload first (``ember dev``), which the router's path does.
    """
    if not uvicorn.__version__.startswith(CHECKED_UVICORN):
        return None
    return functools.partial(
        FastHttpProtocol,
        router=router,
        deployment_id=deployment_id,
        heads=HeadCache(),
        mounted=mounted or _nothing_mounted,
        stale=stale or _never_stale,
        gate=gate,
    )


def _nothing_mounted(path: str) -> bool:
    return False


def _never_stale() -> bool:
    return False


class FastHttpProtocol(BoundedHeadProtocol):
    """uvicorn's httptools protocol with a task-free path for bodiless requests (and the
    request head bounded, ``httphead.py``)."""

    def __init__(
        self,
        config: Any,
        server_state: Any,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        router: Router,
        deployment_id: Callable[[], str],
        heads: HeadCache,
        mounted: Callable[[str], bool] = _nothing_mounted,
        stale: Callable[[], bool] = _never_stale,
        gate: ConnectionGate | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop, gate=gate)
        self._stale = stale
        self._heads = heads
        self._router = router
        self._deployment_id = deployment_id
        self._mounted = mounted
        self._candidate = False  # the current message's head qualified; its end sends it
        self._raw_path = b""
        self._query = b""
        self._body: list[bytes] = []  # a candidate's body as it arrives

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        # The last request (a FastRequest refers back to this protocol) would keep the whole
        # connection's objects in a reference cycle, for the cyclic GC to find: drop it now.
        if isinstance(self.cycle, FastRequest):
            self.cycle = None  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._candidate:
            # A candidate's body did not all come with its head. The router reads such a body
            # under the wall-time limit, and the protocol under the body's deadline (a client
            # trickling it must not hold the request; httphead.py started its clock in this
            # read): hand the request and what arrived of its body to uvicorn's path.
            self._candidate = False
            if self.parser is not None and not self.transport.is_closing():
                self._to_asgi(b"".join(self._body))
            self._body = []

    # -- parser callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        # The scope is built only if the request leaves the fast path (_to_asgi).
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self.scope = None  # type: ignore[assignment]
        self._candidate = False

    def on_headers_complete(self) -> None:
        self._head_complete()
        if self._qualifies():
            self._candidate = True  # its body (if any) and on_message_complete follow
            self._body = []
            return
        self._to_asgi()

    def on_body(self, body: bytes) -> None:
        if self._candidate:
            self._body_arrived(len(body))
            self._body.append(body)
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._candidate:
            super().on_message_complete()
            return
        self._message_complete()
        self._candidate = False
        body = b"".join(self._body) if self._body else None
        self._body = []
        method = self.parser.get_method().decode("ascii")
        request, _ = request_head(
            method,
            self.scheme or "http",
            self.server,
            self._raw_path,
            self._query,
            self.headers,
        )
        if body is not None:
            request.body = body  # as the router's read_inline: the whole (small) body
        try:
            stale = self._stale()  # files changed: the router's path waits for their reload
            pending = (
                None
                if stale
                else self._router.supervisor.fetch_ready(self._deployment_id(), request)
            )
        except Exception:  # the router meets it again and answers as uvicorn does (500)
            pending = None
        if pending is None:  # no isolate ready (or a reload due): the router's general path
            self._to_asgi(body or b"")
            super().on_message_complete()
            return
        fast = FastRequest(self, pending, self.parser.should_keep_alive(), method)
        self.cycle = fast  # type: ignore[assignment]  # what uvicorn checks: pipelining, shutdown
        pending.head.add_done_callback(fast.on_head)

    # -- the decision -------------------------------------------------------------------------

    def _qualifies(self) -> bool:
        parser = self.parser
        cycle = self.cycle
        if (
            (cycle is not None and not cycle.response_complete)  # pipelined: uvicorn queues it
            or self.expect_100_continue
            or self.limit_concurrency is not None
            or self.root_path  # (ember dev sets none; the router's URL would include it)
            or (self.access_log and self.access_logger.isEnabledFor(logging.INFO))
            or parser.get_http_version() != "1.1"
            or parser.should_upgrade()
            or parser.get_method() == b"HEAD"
        ):
            return False
        for name, value in self.headers:
            if name == b"content-length":
                # A small announced body is read whole, as the router's read_inline does.
                if not (value.isdigit() and len(value) < 10 and int(value) <= INLINE_BODY_BYTES):
                    return False
            elif name == b"transfer-encoding":
                return False
        try:
            parsed = _parse_url(self.url)
        except ValueError:
            return False  # uvicorn's own handling answers it (400)
        raw_path = parsed.path
        if not raw_path.isascii():
            return False
        path = _path(raw_path)
        if path in self._router.scheduled_paths or self._mounted(path):
            return False
        self._raw_path = raw_path
        self._query = parsed.query or b""
        return True

    def _to_asgi(self, body: bytes = b"") -> None:
        """Hand the current request to uvicorn's own path (builds what on_message_begin skipped).

        ``body``: what already arrived of its body (a candidate's), as uvicorn's on_body keeps it.
        """
        self.scope = self._scope(self.headers)
        super().on_headers_complete()
        if body:
            self.cycle.body += body
            self.cycle.message_event.set()

    def _scope(self, headers: list[tuple[bytes, bytes]]) -> Any:
        return {
            "type": "http",
            "asgi": {"version": self.asgi_version, "spec_version": "2.3"},
            "http_version": "1.1",
            "server": self.server,
            "client": self.client,
            "scheme": self.scheme,
            "root_path": self.root_path,
            "headers": headers,
            "state": self.app_state.copy(),
        }

    # -- the response -------------------------------------------------------------------------

    def fast_response(self, fast: FastRequest, response: HttpResponse) -> None:
        """Write ``response`` (inline: in one write; streamed: ``ChunkedBody``), or hand it to
        uvicorn's cycle and the router."""
        body = response.body
        if self.flow.write_paused:
            self._respond_asgi(fast, response)
        elif isinstance(body, bytes):
            if not self._write_whole(fast, response, body):
                self._respond_asgi(fast, response)
                return
            self._complete(fast)
        else:
            head = self._streamed_head(fast, response)
            if head is None:
                self._respond_asgi(fast, response)
                return
            fast.writer = ChunkedBody(self, fast, body, functools.partial(self._complete, fast))
            task = fast.writer.start(head)
            task.add_done_callback(self.tasks.discard)  # uvicorn's shutdown waits for its tasks
            self.tasks.add(task)

    def _complete(self, fast: FastRequest) -> None:
        """The whole response is written (as uvicorn's send after the last body message)."""
        fast.response_complete = True
        if not fast.keep_alive:
            self.transport.close()
        self.on_response_complete()

    def _head(self, response: HttpResponse) -> EncodedHead | None:
        key = (response.status, tuple(response.headers), response.status_text)
        encoded = self._heads.get(key)
        if encoded is None:
            encoded = self._heads.put(
                key, encode_head(response.status, response.headers, response.status_text)
            )
        return encoded

    def _streamed_head(self, fast: FastRequest, response: HttpResponse) -> bytes | None:
        # What uvicorn writes for the router's streamed response (no content-length: chunked),
        # or None for what it treats specially (204 and 304 have no body to frame).
        encoded = self._head(response) if response.status not in (204, 304) else None
        if encoded is None:
            return None
        status_line, worker_headers, own_date = encoded
        return b"".join(
            (
                status_line,
                self._heads.defaults(self.server_state.default_headers, own_date),
                worker_headers,
                b"transfer-encoding: chunked\r\n\r\n"
                if fast.keep_alive
                else b"connection: close\r\ntransfer-encoding: chunked\r\n\r\n",
            )
        )

    def _write_whole(self, fast: FastRequest, response: HttpResponse, body: bytes) -> bool:
        # The bytes uvicorn's RequestResponseCycle.send writes for the router's response
        # (status line, default headers, the worker's, content-length, connection: close if
        # not keep-alive), or False for what it would treat specially.
        encoded = self._head(response)
        if encoded is None:
            return False
        status_line, worker_headers, own_date = encoded
        self.transport.write(
            b"".join(
                (
                    status_line,
                    self._heads.defaults(self.server_state.default_headers, own_date),
                    worker_headers,
                    b"content-length: %d\r\n" % len(body),
                    b"\r\n" if fast.keep_alive else b"connection: close\r\n\r\n",
                    body,
                )
            )
        )
        return True

    def _respond_asgi(self, fast: FastRequest, response: HttpResponse) -> None:
        """The response through a RequestResponseCycle and the router, as without this class."""
        parsed = _parse_url(fast.url)
        scope = self._scope(fast.headers)
        scope["method"] = fast.method
        scope["path"] = self.root_path + _path(parsed.path)  # as on_headers_complete builds them
        scope["raw_path"] = self.root_path.encode("ascii") + parsed.path
        scope["query_string"] = parsed.query or b""
        cycle = RequestResponseCycle(
            scope=scope,
            transport=self.transport,
            flow=self.flow,
            logger=self.logger,
            access_logger=self.access_logger,
            access_log=self.access_log,
            default_headers=self.server_state.default_headers,
            message_event=asyncio.Event(),
            expect_100_continue=False,
            keep_alive=fast.keep_alive,
            on_response=self.on_response_complete,
        )
        cycle.more_body = False
        if self.cycle is fast:
            self.cycle = cycle
        router = self._router

        async def respond(scope: Any, receive: Any, send: Any) -> None:
            await router.respond(receive, send, response)

        self._start_asgi_task(cycle, respond)


def _parse_url(url: bytes) -> Any:
    try:
        return parse_url(url)
    except HttpParserInvalidURLError as exc:
        raise ValueError(str(exc)) from None


def _path(raw_path: bytes) -> str:
    path = raw_path.decode("ascii")
    return unquote(path) if "%" in path else path
