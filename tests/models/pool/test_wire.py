"""The lean replica client (``wire.py``) against its reference, httpx, on random responses:
chunked bodies with random chunk sizes, extensions and trailers, Content-Length bodies, bodies
ended by closing the connection, and keep-alive reuse."""

from __future__ import annotations

import asyncio
import random
import socket

import httpx
import pytest

from ember.models.pool.wire import ChunkedDecoder, WireConnectError, WirePool


def _response(rng: random.Random, body: bytes) -> tuple[bytes, bool]:
    """A random HTTP/1.1 framing of ``body``; (bytes, whether the server closes after it)."""
    kind = rng.choice(["chunked", "length", "close"])
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-n: 1\r\n"
    if kind == "length":
        return head + b"content-length: %d\r\n\r\n" % len(body) + body, False
    if kind == "close":
        return head + b"connection: close\r\n\r\n" + body, True
    out, at = [head + b"Transfer-Encoding: chunked\r\n\r\n"], 0
    while at < len(body):
        size = rng.randint(1, 300)
        piece = body[at : at + size]
        extension = b";ext=1" if rng.random() < 0.2 else b""
        out.append(b"%x%s\r\n%s\r\n" % (len(piece), extension, piece))
        at += size
    out.append(b"0\r\n" + (b"x-trailer: 1\r\n" if rng.random() < 0.3 else b"") + b"\r\n")
    return b"".join(out), False


async def _serve(responses: list[tuple[bytes, bool]]) -> tuple[asyncio.Server, int, list[int]]:
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while responses:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                await reader.readexactly(length)
                data, close = responses.pop(0)
                for start in range(0, len(data), 97):  # dribble it out in pieces
                    writer.write(data[start : start + 97])
                    await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], connections


def test_wire_reads_what_httpx_reads_on_random_responses() -> None:
    rng = random.Random()

    async def main() -> None:
        for _ in range(30):
            body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 3000)))
            framed = _response(rng, body)
            server, port, _ = await _serve([framed, framed])
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            async with httpx.AsyncClient() as client:
                reference = await client.post(url, json={"a": 1})
            pool = WirePool()
            response = await pool.post(url, {"a": 1})
            assert response.status == reference.status_code == 200
            assert response.headers["x-n"] == reference.headers["x-n"]
            assert await response.read() == reference.content == body
            response.close()
            pool.close()
            server.close()

    asyncio.run(main())


def test_keep_alive_reuses_one_connection_and_early_close_drops_it() -> None:
    async def main() -> None:
        plain = [(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", False)] * 3
        server, port, connections = await _serve(list(plain))
        pool = WirePool()
        url = f"http://127.0.0.1:{port}/"
        for _ in range(2):
            response = await pool.post(url, {})
            assert await response.read() == b"ok"
            response.close()
        assert len(connections) == 1
        # Every token is a small write: Nagle's algorithm must not hold one back for an ACK.
        (idle,) = next(iter(pool._idle.values()))
        sock = idle.writer.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        response = await pool.post(url, {})
        response.close()  # not read: the connection cannot be reused
        pool.close()
        server.close()
        with pytest.raises(WireConnectError):
            await WirePool().post(url, {})

    asyncio.run(main())


@pytest.mark.parametrize(
    "headers",
    [
        {"content-length": "0"},
        {"Transfer-Encoding": "chunked"},
        {"x-a": "b\r\nhost: x"},
        {"a b": "c"},
    ],
)
def test_headers_that_could_reframe_a_request_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        asyncio.run(WirePool().post("http://127.0.0.1:9/", {}, headers))


def test_the_chunked_decoder_gives_the_body_however_the_bytes_are_split() -> None:
    rng = random.Random()
    for _ in range(200):
        body = rng.randbytes(rng.randint(0, 2000))
        framed, _ = _response(rng, body)
        if b"Transfer-Encoding: chunked" not in framed:
            continue
        encoded = framed.split(b"\r\n\r\n", 1)[1]
        decoder = ChunkedDecoder()
        out, at = [], 0
        while at < len(encoded):  # the bytes arrive in random pieces, down to one byte
            step = rng.choice([1, 2, 3, 7, 64, 500])
            out.append(decoder.feed(encoded[at : at + step]))
            at += step
        assert decoder.done and not decoder.leftover
        assert b"".join(out) == body
