"""Time the server holds a request body back is not the client's (``bodyclock.py``).

A real uvicorn server with ember's protocol (``httphead.BoundedHeadProtocol``) and a body
deadline of 2 s serves a small ASGI app on loopback. The server holds a body back while it
has not answered ``Expect: 100-continue`` (the app did not ask for the body yet) and while a
pipelined request waits behind the one before it (reading paused, and a queued request's clock
starts only when the request does): a client that sends its body as soon as it may is served,
however long that wait; one that does not send it gets ``408``.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager

from starlette.types import Receive, Scope, Send

from ember.runtime.connguard import ConnectionLimits
from tests.runtime.protocol_server import protocol_server

LIMITS = ConnectionLimits(body_timeout_s=2, body_min_rate=1024**3)  # no allowance for progress
HOLD_S = 4.0  # how long the app keeps the body waiting: twice the deadline
PATIENCE_S = 60.0


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":
        await asyncio.sleep(HOLD_S)  # asks for nothing meanwhile: no "100 Continue" yet
    body = b""
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if scope["path"] == "/read-then-slow":
        await asyncio.sleep(HOLD_S)  # its body read: the server reads on, for what follows
    answer = f"{scope['path']} {len(body)}".encode()
    length = str(len(answer)).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", length)]}
    )
    await send({"type": "http.response.body", "body": answer})


def serving(limits: ConnectionLimits = LIMITS) -> AbstractAsyncContextManager[int]:
    return protocol_server(app, limits)


async def _until(reader: asyncio.StreamReader, marker: bytes) -> bytes:
    return await asyncio.wait_for(reader.readuntil(marker), PATIENCE_S)


def test_the_wait_for_100_continue_is_not_the_clients() -> None:
    async def run() -> bytes:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                b"Expect: 100-continue\r\n\r\n"
            )
            assert await _until(reader, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
            writer.write(b"hello")  # at once: the client was never slow
            reply = await asyncio.wait_for(reader.read(), PATIENCE_S)
            writer.close()
            return reply

    reply = asyncio.run(run())
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:300]
    assert reply.endswith(b"/slow 5")


def test_a_pipelined_request_waiting_for_100_continue_is_not_timed_until_it_is_sent() -> None:
    # The second request waits behind the first, then its app takes HOLD_S before it asks for
    # the body. Reading resumes when the first answer ends, which must not end the wait for
    # "100 Continue": the client still may not send its body, so none of that time is its.
    async def run() -> tuple[bytes, bytes, bytes]:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"
                b"POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                b"Expect: 100-continue\r\n\r\n"
            )
            first = await _until(reader, b"/slow 0")
            interim = await _until(reader, b"\r\n\r\n")
            if interim.startswith(b"HTTP/1.1 100 "):
                writer.write(b"hello")  # at once: the client was never slow
                writer.write_eof()
            second = await asyncio.wait_for(reader.read(), PATIENCE_S)
            writer.close()
            return first, interim, second

    first, interim, second = asyncio.run(run())
    assert first.startswith(b"HTTP/1.1 200 "), first[:300]
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n", interim[:300]
    assert second.startswith(b"HTTP/1.1 200 ") and second.endswith(b"/slow 5"), second[:300]


def test_a_pipelined_body_waits_on_the_servers_time() -> None:
    async def run() -> tuple[bytes, bytes]:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"
                b"POST /next HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n12345"
            )
            first = await _until(reader, b"/slow 0")  # the server read nothing meanwhile
            writer.write(b"67890")
            writer.write_eof()
            second = await asyncio.wait_for(reader.read(), PATIENCE_S)
            writer.close()
            return first, second

    first, second = asyncio.run(run())
    assert first.startswith(b"HTTP/1.1 200 "), first[:300]
    assert second.startswith(b"HTTP/1.1 200 ") and second.endswith(b"/next 10"), second[:300]


def test_a_pipelined_request_is_not_timed_before_it_starts() -> None:
    # The first request read its body (uvicorn reads on), then takes HOLD_S. The second's
    # clock starts when it does; before, a 408 for it would have cut into the first's answer.
    async def run() -> tuple[bytes, bytes]:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /read-then-slow HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"
                b"POST /next HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n12345"
            )
            first = await _until(reader, b"/read-then-slow 0")
            writer.write(b"67890")
            writer.write_eof()
            second = await asyncio.wait_for(reader.read(), PATIENCE_S)
            writer.close()
            return first, second

    first, second = asyncio.run(run())
    assert first.startswith(b"HTTP/1.1 200 "), first[:300]
    assert second.startswith(b"HTTP/1.1 200 ") and second.endswith(b"/next 10"), second[:300]


def test_a_body_never_sent_after_100_continue_gets_408() -> None:
    async def run() -> bytes:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /fast HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                b"Expect: 100-continue\r\n\r\n"
            )
            reply = await asyncio.wait_for(reader.read(), PATIENCE_S)  # until it closes
            writer.close()
            return reply

    reply = asyncio.run(run())
    assert reply.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 408 Request Timeout\r\n")
    assert b"(server.body_timeout" in reply


def test_body_bytes_in_the_heads_read_earn_their_time() -> None:
    # 1 s per KiB: the 8 KiB that came with the head move the deadline from 2 s to 10 s, so
    # the last byte, sent 5 s later, is in time.
    limits = ConnectionLimits(body_timeout_s=2, body_min_rate=1024)

    async def run() -> bytes:
        async with serving(limits) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            body = b"b" * 8192
            writer.write(
                b"POST /fast HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body) + 1, body)
            )
            await asyncio.sleep(5)
            try:
                writer.write(b"!")
                writer.write_eof()
            except OSError:
                pass  # answered (408) and closed already
            reply = await asyncio.wait_for(reader.read(), PATIENCE_S)
            writer.close()
            return reply

    reply = asyncio.run(run())
    assert reply.startswith(b"HTTP/1.1 200 ") and reply.endswith(b"/fast 8193"), reply[:300]


def test_a_kept_alive_connections_next_head_gets_its_own_head_deadline() -> None:
    """The head's deadline ends with the head: a GET's stale timer must not fire on the next
    request's head, which started later on the same connection and has its own full period."""
    limits = ConnectionLimits(head_timeout_s=2, keepalive_timeout_s=30, body_timeout_s=2)

    async def run() -> bytes:
        async with serving(limits) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /first HTTP/1.1\r\nHost: t\r\n\r\n")  # its head timer: 2 s
            await writer.drain()
            first = await _until(reader, b"/first 0")
            await asyncio.sleep(1.0)
            # The next head in two parts 1.5 s apart: within its own 2 s, but past the end of
            # the first request's period.
            writer.write(b"GET /next HTTP/1.1\r\n")
            await writer.drain()
            await asyncio.sleep(1.5)
            writer.write(b"Host: t\r\n\r\n")
            await writer.drain()
            second = await asyncio.wait_for(reader.read(65536), PATIENCE_S)
            writer.close()
            return first + second

    said = asyncio.run(run())
    assert b"408" not in said, said
    assert said.count(b"HTTP/1.1 200") == 2, said
