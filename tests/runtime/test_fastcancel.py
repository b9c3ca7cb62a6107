"""A connection that drops at the boundary between a streamed response's head and its body.

The race the soak walkthrough found (``ember dev``'s fast path only): the response head of a
streamed body (a binding's stream handed back unread, or the worker's own stream) is ready,
and the client's connection is lost before the first byte of the body is written. Both orders
the event loop can run them in are produced here deterministically, on both servers of
``DualServers`` (the fast path and uvicorn's, its reference): at the moment the isolate's head
arrives, the server's end of the connection is aborted (exactly what a client's reset does to
the protocol: ``connection_lost``), either just before the head is set (``drop-then-head``:
``connection_lost`` runs with the head done, before the head's callbacks) or just after it
(``head-then-drop``: the head's callbacks run first, then ``connection_lost``).

Either way exactly that request must be cancelled: the service's stream is closed (a model
stops generating), the request is logged ``canceled``, and the isolate is not stopped.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ember.bindings.registry import default_registry
from ember.runtime import events as E
from ember.runtime.inflight import InFlight
from tests.runtime import slow_binding
from tests.runtime.dual_servers import DualServers, exchange
from tests.runtime.harness import write_project

WORKER = """
from workers import Response, WorkerEntrypoint

SSE = {"content-type": "text/event-stream"}


async def relay(stream):
    async for chunk in stream:
        yield chunk


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        kind = request.headers.get("x-kind", "")
        if kind == "plain":
            return Response("ok")
        stream = await self.env.SLOW.held(request.headers["x-tag"])
        if kind == "own":  # the worker's own stream, through the isolate
            stream = relay(stream)
        return Response(stream, headers=SSE)
"""

ORDERS = ("drop-then-head", "head-then-drop")


class Drops:
    """Server-side transports by client port, and which requests to drop at their head."""

    def __init__(self) -> None:
        self.transports: dict[int, Any] = {}
        self.orders: dict[str, str] = {}  # tag -> order


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DualServers, Drops]]:
    root = write_project(
        tmp_path_factory.mktemp("fastcancel") / "fastcancel", WORKER, "slow:\n  binding: SLOW\n"
    )
    drops = Drops()
    made = HttpToolsProtocol.connection_made
    on_response = InFlight.on_response

    def connection_made(self: Any, transport: Any) -> None:
        made(self, transport)
        drops.transports[transport.get_extra_info("peername")[1]] = transport

    def dropping(self: InFlight, message: Any) -> None:
        query = parse_qs(urlsplit(self.url).query)
        order = drops.orders.pop(query.get("t", [""])[0], None)
        transport = drops.transports.get(int(query["port"][0])) if order else None
        if transport is not None and order == "drop-then-head":
            transport.abort()  # connection_lost is scheduled before the head's callbacks
        on_response(self, message)
        if transport is not None and order == "head-then-drop":
            transport.abort()  # ... or after them

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(HttpToolsProtocol, "connection_made", connection_made)
        patch.setattr(InFlight, "on_response", dropping)
        both = DualServers(
            root,
            tmp_path_factory.mktemp("fastcancel-state"),
            registry=default_registry([slow_binding.BINDING_TYPE]),
        )
        try:
            yield both, drops
        finally:
            both.close()


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("kind", ["pipe", "own"])
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "asgi"])
def test_a_connection_lost_between_head_and_body_cancels_only_that_request(
    servers: tuple[DualServers, Drops], fast: bool, kind: str, order: str
) -> None:
    both, drops = servers
    address = both.addresses[fast]
    plain = [(b"GET / HTTP/1.1\r\nHost: c.test\r\nx-kind: plain\r\n\r\n", "GET")]
    both.client(lambda: exchange(address, plain, False))  # an isolate is ready
    tracker = both.servers[fast].supervisor.resources.shared(  # type: ignore[union-attr]
        slow_binding.TRACKER_KEY, slow_binding.Tracker
    )
    sink = both.sinks[fast]
    seen_before = len(sink.events)
    tag = f"{kind}-{order}-{os.urandom(3).hex()}"
    drops.orders[tag] = order
    closed = both.client(lambda: _dropped(address, tag, kind, tracker))
    assert closed, f"the service's stream of {tag} was never closed"
    events = sink.events[seen_before:]
    outcomes = [e.outcome for e in events if isinstance(e, E.RequestEvent) and tag in e.url]
    assert outcomes == ["canceled"], (tag, events)
    stopped = [e for e in events if isinstance(e, E.LifecycleEvent) and "stopped" in e.message]
    assert stopped == []
    answers, _ = both.client(lambda: exchange(address, plain, False))
    assert answers[0][1] == b"ok"  # and the isolate still serves


def _dropped(address: tuple[str, int], tag: str, kind: str, tracker: slow_binding.Tracker) -> bool:
    """Send a request the server drops at its head; True once its stream was closed."""
    with socket.create_connection(address, timeout=30) as sock:
        port = sock.getsockname()[1]
        sock.sendall(
            f"GET /?t={tag}&port={port} HTTP/1.1\r\nHost: c.test\r\nx-kind: {kind}\r\n"
            f"x-tag: {tag}\r\n\r\n".encode()
        )
        try:
            while sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
    # Closing is asynchronous (a task's cancellation, the isolate's Cancel): wait for it, up to
    # a bound far above what it takes (without a cancellation it stays open until the wall limit).
    for _ in range(300):
        if tracker.get(f"stream-closed:{tag}"):
            return True
        time.sleep(0.05)
    return False
