"""A chunked body's trailers are bounded as its head is, and never become request headers.

After the last chunk (``0\\r\\n``) the parser reads trailer fields as it reads headers, while the
head's bound no longer counts: a client could send 20 MB of them, which uvicorn appended one
by one to the request's ``scope["headers"]``. A real uvicorn server with ember's protocol
serves a small ASGI app on loopback; the client is a raw socket.
"""

from __future__ import annotations

import asyncio
import random
import socket
from contextlib import AbstractAsyncContextManager

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.server import ServerState

from ember.runtime.connguard import ConnectionLimits
from ember.runtime.httphead import MAX_HEAD_BYTES, BoundedHeadProtocol
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


def _chunked_with_framing(framing: int) -> bytes:
    """A chunked request whose bytes after its last body byte (the chunk's CRLF, the last
    chunk, trailers, the closing CRLF) are ``framing`` in all."""
    before, after = b"\r\n0\r\n", b"\r\n"
    left = framing - len(before) - len(after)
    fields = []
    while left > 0:
        size = min(left, len(FIELD))
        if 0 < left - size < len(b"X-T: \r\n"):  # the last field must still be one
            size = left - len(b"X-T: \r\n")
        fields.append(b"X-T: " + b"a" * (size - len(b"X-T: \r\n")) + b"\r\n")
        left -= size
    data = HEAD + b"5\r\nhello" + before + b"".join(fields) + after
    assert len(data) - len(HEAD + b"5\r\nhello") == framing
    return data


async def _one_read(data: bytes, reads: list[int] | None = None) -> bytes:
    """Feed ``data`` to the protocol as one read (as asyncio may hand 256 KiB at once), or cut
    at the offsets ``reads``, on a socketpair; the reply, until the server closes."""
    config = uvicorn.Config(app, http=BoundedHeadProtocol, lifespan="off", log_level="error")
    config.load()
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    loop = asyncio.get_running_loop()
    protocol = BoundedHeadProtocol(config=config, server_state=ServerState(), app_state={})
    await loop.connect_accepted_socket(lambda: protocol, ours)
    cuts = [0, *(reads or []), len(data)]
    for begin, end in zip(cuts, cuts[1:], strict=False):
        if not protocol.transport.is_closing():
            protocol.data_received(data[begin:end])
    reply = b""
    with theirs:
        try:
            while chunk := await asyncio.wait_for(loop.sock_recv(theirs, 1 << 16), PATIENCE_S):
                reply += chunk
                if reply.endswith(b"body=5 headers=host,transfer-encoding"):
                    break  # served, and kept alive
        except ConnectionResetError:
            pass
    return reply


@pytest.mark.parametrize("how", ["one read", "one send"])
@pytest.mark.parametrize(("framing", "status"), [(-1, 200), (0, 200), (1, 431)])
def test_the_trailer_bound_is_exact_with_everything_in_one_read(
    how: str, framing: int, status: int
) -> None:
    """Head, body and trailers together: what follows the last body byte was counted only from
    the end of the read's first bounded slice (200,000 bytes of trailers were served)."""
    data = _chunked_with_framing(MAX_HEAD_BYTES + framing)
    reply = asyncio.run(_one_read(data) if how == "one read" else _exchange([data]))
    assert reply.startswith(b"HTTP/1.1 %d " % status), reply[:300]


@pytest.mark.parametrize("excess", [0, 1])
def test_a_pipelined_head_after_a_body_in_the_same_read_is_bounded_exactly(excess: int) -> None:
    body = b"b" * 1000
    first = HEAD.replace(b"Transfer-Encoding: chunked", b"Content-Length: 1000") + body
    second = b"GET /second HTTP/1.1\r\nHost: t\r\nConnection: close\r\nX-Big: \r\n\r\n"
    filler = b"a" * (MAX_HEAD_BYTES + excess - len(second))
    second = second.replace(b"X-Big: ", b"X-Big: " + filler)
    assert len(second) == MAX_HEAD_BYTES + excess
    reply = asyncio.run(_one_read(first + second))
    if excess == 0:
        assert reply.count(b"HTTP/1.1 200 ") == 2, reply[-400:]
    else:  # refused while the first is answered: only the connection ends, the second unserved
        assert reply.count(b"HTTP/1.1 200 ") <= 1, reply[-400:]


def _random_chunked(rng: random.Random) -> tuple[bytes, int, bool]:
    """A chunked request with runs of framing near the bound; its body's size, and whether
    every run (bytes between two body bytes, or before the first, or after the last) fits."""
    near = [MAX_HEAD_BYTES - 1, MAX_HEAD_BYTES, MAX_HEAD_BYTES + 1]
    runs: list[int] = []
    data = HEAD
    body = 0
    for _ in range(rng.randint(0, 3)):
        size = rng.choice([1, 2, 100, 70_000])
        extension = b""
        if rng.random() < 0.3:
            extension = b";e=" + b"x" * (rng.choice(near) - len(b"%x;e=\r\n" % size) - 2)
        line = b"%x%s\r\n" % (size, extension)
        runs.append(len(line) + (2 if body else 0))  # the previous chunk's CRLF, then the line
        data += line + b"d" * size + b"\r\n"
        body += size
    trailers = b""
    if rng.random() < 0.7:
        want = rng.choice(near) - len(b"0\r\n\r\n") - (2 if body else 0)
        while len(trailers) < want - len(FIELD) - 8:
            trailers += FIELD
        trailers += b"X-L: " + b"l" * (want - len(trailers) - 7) + b"\r\n"
    data += b"0\r\n" + trailers + b"\r\n"
    runs.append(len(b"0\r\n" + trailers + b"\r\n") + (2 if body else 0))
    return data, body, max(runs) <= MAX_HEAD_BYTES


@pytest.mark.parametrize("seed", range(12))
def test_the_bound_matches_the_reference_for_random_bodies_and_reads(seed: int) -> None:
    """The slow reference: the framing runs known from how the request was built; the server
    gets it in random reads (one, or cut at random offsets) and must serve it exactly when every
    run fits."""
    rng = random.Random(seed)
    data, body, fits = _random_chunked(rng)
    reads = sorted(rng.sample(range(1, len(data)), rng.randint(0, 4)))
    reply = asyncio.run(_one_read(data, reads))
    if fits:
        assert reply.startswith(b"HTTP/1.1 200 "), (seed, reply[:300])
        assert reply.endswith(b"body=%d headers=host,transfer-encoding" % body), reply[-200:]
    else:
        assert reply.startswith(b"HTTP/1.1 431 "), (seed, reply[:300])
