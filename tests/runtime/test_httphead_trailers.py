"""A chunked body's trailers are bounded as its head is, and never become request headers.

After the last chunk (``0\\r\\n``) the parser reads trailer fields as it reads headers, while the
head's bound no longer counts: a client could send 20 MB of them, which uvicorn appended one
by one to the request's ``scope["headers"]``. A real uvicorn server with ember's protocol
serves a small ASGI app on loopback; the client is a raw socket.
"""

from __future__ import annotations

import asyncio
import socket
from contextlib import AbstractAsyncContextManager

from starlette.types import Receive, Scope, Send

from ember.runtime.connguard import ConnectionLimits
from ember.runtime.httphead import MAX_HEAD_BYTES
from tests.runtime.protocol_server import protocol_server

PATIENCE_S = 60.0
HEAD = b"POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
FIELD = b"X-T: " + b"a" * 1000 + b"\r\n"


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        more = message.get("more_body", False)
    names = b",".join(sorted({name for name, _ in scope["headers"]}))
    answer = b"body=%d headers=%s" % (len(body), names)
    length = str(len(answer)).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", length)]}
    )
    await send({"type": "http.response.body", "body": answer})


def serving() -> AbstractAsyncContextManager[int]:
    return protocol_server(app, ConnectionLimits())


async def _exchange(parts: list[bytes]) -> bytes:
    """Send ``parts`` one write each while reading the reply, until the server closes.

    The reading runs alongside: a server that answers and closes before it read everything
    resets the connection, and what the client had not read by then could be lost.
    """
    loop = asyncio.get_running_loop()
    async with serving() as port:
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.setblocking(False)

            async def send_all() -> None:
                try:
                    for part in parts:
                        await loop.sock_sendall(client, part)
                except OSError:
                    pass  # the server answered and closed before it read everything

            async def read_all() -> bytes:
                reply = b""
                try:
                    while chunk := await loop.sock_recv(client, 1 << 16):
                        reply += chunk
                except ConnectionResetError:
                    pass  # after the answer: the server closed with bytes unread
                return reply

            sending = asyncio.ensure_future(send_all())
            reply = await asyncio.wait_for(read_all(), PATIENCE_S)
            await sending
            return reply


def test_trailers_past_the_bound_are_refused_with_431() -> None:
    trailers = [FIELD * 100] * 20  # 2 MB of trailers, in writes of 100 KB
    reply = asyncio.run(_exchange([HEAD + b"5\r\nhello\r\n0\r\n", *trailers, b"\r\n"]))
    assert reply.startswith(b"HTTP/1.1 431 "), reply[:300]
    assert b"trailer" in reply


def test_a_chunk_extension_past_the_bound_is_refused_with_431() -> None:
    extension = [b"a" * 100_000] * 20  # 2 MB of one chunk's extension
    reply = asyncio.run(_exchange([HEAD + b"5;ext=", *extension, b"\r\nhello\r\n0\r\n\r\n"]))
    assert reply.startswith(b"HTTP/1.1 431 "), reply[:300]


def test_trailers_within_the_bound_are_served_and_not_request_headers() -> None:
    trailers = FIELD * (MAX_HEAD_BYTES // len(FIELD) // 2)
    reply = asyncio.run(_exchange([HEAD + b"5\r\nhello\r\n0\r\n", trailers, b"\r\n"]))
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:300]
    assert reply.endswith(b"body=5 headers=host,transfer-encoding"), reply[-300:]


def test_a_long_chunked_body_in_many_reads_is_not_counted_as_trailers() -> None:
    chunk = b"%x\r\n%s\r\n" % (60_000, b"b" * 60_000)
    reply = asyncio.run(_exchange([HEAD, *[chunk] * 50, b"0\r\n\r\n"]))
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:300]
    assert reply.endswith(b"body=3000000 headers=host,transfer-encoding"), reply[-300:]
