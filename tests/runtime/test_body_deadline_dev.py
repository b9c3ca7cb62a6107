"""``ember dev``'s request-body deadline on both HTTP paths (``fasthttp.py`` and uvicorn's).

The fast path reads a small announced body that came with its head itself; one that did not all
come is handed to uvicorn's path with what arrived, and from there the deadline holds as for any
body. Two real ``ember dev`` servers with a short ``body_timeout`` serve a worker and the
platform's AI routes (an ``ai`` binding): a trickled body gets ``408`` and the connection
closes, with no traceback logged; a body sent at once is served as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import socket
import time
from collections.abc import Iterator

import pytest

from ember.runtime.connguard import ConnectionLimits
from tests.runtime.dual_servers import DualServers
from tests.runtime.harness import write_project

WORKER = """
import hashlib
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        body = await request.bytes()
        return Response(f"{len(body)} {hashlib.sha256(body).hexdigest()}")
"""
PATIENCE_S = 60.0  # how long a client waits for what it should get; never asserted on
HEADS = {
    "inline": b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n",
    "streamed": b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n",
    "chunked": b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
    "ai-v1": (
        b"POST /ai/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    ),
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DualServers]:
    root = tmp_path_factory.mktemp("bodydev") / "bodydev"
    write_project(root, WORKER, "ai:\n  binding: AI\n")
    limits = ConnectionLimits(body_timeout_s=1, body_min_rate=1024)
    both = DualServers(root, tmp_path_factory.mktemp("bodydev-state"), limits=limits)
    try:
        yield both
    finally:
        both.close()


def _trickle(address: tuple[str, int], head: bytes, piece: bytes) -> bytes:
    """Send ``head``, then ``piece`` every 0.2 s until the server answers and closes."""
    with socket.create_connection(address, timeout=PATIENCE_S) as conn:
        conn.sendall(head + piece)  # part of the body with the head: the fast path's first look
        conn.settimeout(0.2)
        deadline = time.monotonic() + PATIENCE_S
        reply = b""
        while time.monotonic() < deadline:
            try:
                chunk = conn.recv(65536)
            except TimeoutError:
                if not reply:
                    with contextlib.suppress(OSError):
                        conn.sendall(piece)
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            reply += chunk
        return reply


@pytest.mark.parametrize("kind", list(HEADS))
def test_a_trickled_body_is_answered_408_on_both_paths(
    servers: DualServers, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    piece = b"1\r\nx\r\n" if kind == "chunked" else b"x"
    with caplog.at_level(logging.ERROR):
        for fast, address in servers.addresses.items():
            reply = servers.client(lambda address=address: _trickle(address, HEADS[kind], piece))
            assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), (fast, reply[:300])
            assert b"connection: close" in reply and b"(server.body_timeout" in reply, reply
        servers.client(lambda: time.sleep(0.2))  # the abandoned requests end on the server's loop
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


def test_a_body_sent_with_its_head_is_served_on_both_paths(servers: DualServers) -> None:
    body = b"y" * 5000
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n"
    for address in servers.addresses.values():

        def send(address: tuple[str, int] = address) -> bytes:
            with socket.create_connection(address, timeout=PATIENCE_S) as conn:
                conn.sendall(head + body)
                reply = b""
                while chunk := conn.recv(65536):
                    reply += chunk
                return reply

        reply = servers.client(send)
        assert reply.startswith(b"HTTP/1.1 200 OK\r\n"), reply[:300]
        assert reply.endswith(f"5000 {hashlib.sha256(body).hexdigest()}".encode())
