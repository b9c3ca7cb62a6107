"""The request-head bound holds however the bytes are split into reads (``httphead.py``).

asyncio hands ``data_received`` up to 256 KiB at once, so a whole head past 128 KiB can arrive in
one read. The protocol here is connected to a real socket (one end of a socketpair) and fed each
case as one read, as asyncio would hand it over; the reply is read from the other end.
"""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.server import ServerState

from ember.runtime.httphead import MAX_HEAD_BYTES, BoundedHeadProtocol


def _get(path: str, header_bytes: int = 0, close: bool = True) -> bytes:
    head = f"GET {path} HTTP/1.1\r\nHost: t\r\n".encode()
    if header_bytes:
        head += b"X-Big: " + b"a" * header_bytes + b"\r\n"
    return head + (b"Connection: close\r\n" if close else b"") + b"\r\n"


async def _one_read(data: bytes) -> tuple[bytes, list[str]]:
    """Feed ``data`` as one read; return the reply and the paths the app was called with."""
    paths: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    config = uvicorn.Config(app, http=BoundedHeadProtocol, lifespan="off", log_level="error")
    config.load()
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    loop = asyncio.get_running_loop()
    protocol = BoundedHeadProtocol(config=config, server_state=ServerState(), app_state={})
    await loop.connect_accepted_socket(lambda: protocol, ours)
    protocol.data_received(data)
    reply = b""
    with theirs:
        while chunk := await asyncio.wait_for(loop.sock_recv(theirs, 1 << 16), 30):
            reply += chunk
    return reply, paths


@pytest.mark.parametrize("excess", [1, 1024, 100 * 1024])
def test_a_whole_head_past_the_bound_in_one_read_is_refused(excess: int) -> None:
    data = _get("/big", MAX_HEAD_BYTES + excess)
    reply, paths = asyncio.run(_one_read(data))
    assert reply.startswith(b"HTTP/1.1 431 "), reply[:200]
    assert paths == []


def test_a_head_at_the_bound_is_served() -> None:
    data = _get("/fits", 1)
    data = _get("/fits", MAX_HEAD_BYTES - len(data) + 1)
    assert len(data) == MAX_HEAD_BYTES
    reply, paths = asyncio.run(_one_read(data))
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]
    assert paths == ["/fits"]


def test_a_body_or_pipelined_requests_in_the_same_read_are_not_counted_as_head() -> None:
    body = b"b" * (200 * 1024)
    post = b"POST /post HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body)
    pipelined = post + body + _get("/one", 60 * 1024, close=False) + _get("/two", 60 * 1024)
    reply, paths = asyncio.run(_one_read(pipelined))
    assert reply.count(b"HTTP/1.1 200 ") == 3, reply[:400]
    assert paths == ["/post", "/one", "/two"]
