"""A lean HTTP/1.1 client for replica streams: one POST, then the body as it arrives.

Streams are the pool's hot path: every generated token crosses it as one small SSE event.
httpx costs about 0.1 ms of CPU per event (anyio, httpcore and h11 layers); reading the
chunked body straight from an asyncio stream costs a fraction of that, which on a CPU box is
throughput the model keeps (bench/ai.py). Only what replicas send is supported: a status line,
headers, and a body framed by ``Transfer-Encoding: chunked``, ``Content-Length`` or the end of
the connection. Connections are kept alive for reuse only after a body was read to its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 64 * 1024
MAX_IDLE_PER_HOST = 256
READ_LIMIT = 1 << 20
READ_BYTES = 1 << 16
# Headers the client writes itself; a caller's must never add or change them.
FRAMING = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "content-type",
        "accept",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "keep-alive",
        "proxy-connection",
    }
)
_TOKEN = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
CONNECT_TIMEOUT = 5.0


class WireError(Exception):
    """The connection broke or the server spoke something that is not HTTP/1.1."""


class WireConnectError(WireError):
    """The connection could not be made (nothing of the request was sent)."""


@dataclass(eq=False)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


@dataclass(eq=False)
class StreamedResponse:
    """Status, headers, and the body to read with ``chunks()`` or ``read()``."""

    status: int
    headers: Mapping[str, str]
    _connection: _Connection
    _pool: WirePool
    _key: tuple[str, int, bool]
    _done: bool = False
    _closed: bool = False
    _framing: str = field(default="close")
    _reusable: bool = True  # no bytes past the end of the body were read
    _decoder: ChunkedDecoder | None = None
    _received: int = 0

    async def next_bytes(self) -> bytes | None:
        """The body bytes that arrived since the last call (waits for some); None at the end.

        One read takes everything the server sent meanwhile (for a chunked body: every chunk,
        decoded). Cancelling it loses nothing: the bytes stay buffered for the next call.
        """
        if self._done:
            return None
        reader = self._connection.reader
        try:
            while True:
                if self._framing == "chunked":
                    decoder = self._decoder
                    if decoder is None:
                        decoder = self._decoder = ChunkedDecoder()
                    data = await reader.read(READ_BYTES)
                    if not data:
                        raise WireError("the connection closed before the body ended")
                    payload = decoder.feed(data)
                    if decoder.done:
                        self._done = True
                        self._reusable = not decoder.leftover
                        return payload or None
                    if payload:
                        return payload
                elif self._framing.startswith("length:"):
                    remaining = int(self._framing[7:]) - self._received
                    if remaining <= 0:
                        self._done = True
                        return None
                    data = await reader.read(min(remaining, READ_BYTES))
                    if not data:
                        raise WireError("the connection closed before the body ended")
                    self._received += len(data)
                    return data
                else:
                    data = await reader.read(READ_BYTES)
                    if not data:
                        self._done = True
                        return None
                    return data
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise WireError(f"malformed or cut body ({type(exc).__name__})") from None
        except OSError as exc:
            raise WireError(f"{type(exc).__name__}: {exc}") from None

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive."""
        while (data := await self.next_bytes()) is not None:
            yield data

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    def abort(self) -> None:
        """Cut the connection now: a read in progress ends, and the server sees its client go."""
        with contextlib.suppress(Exception):
            self._connection.writer.transport.abort()

    def close(self) -> None:
        """Give the connection back if the body was read to its end, else close it."""
        if self._closed:
            return
        self._closed = True
        keep = self.headers.get("connection", "").lower() != "close"
        if self._done and self._reusable and keep and self._framing != "close":
            self._pool._release(self._key, self._connection)
        else:
            self._connection.close()


class ChunkedDecoder:
    """``Transfer-Encoding: chunked``, decoded incrementally from the bytes that have arrived."""

    _SIZE, _DATA, _CRLF, _TRAILER = range(4)

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._state = self._SIZE
        self._left = 0  # data bytes of the current chunk still to come
        self.done = False
        self.leftover = False  # bytes came after the end (the connection cannot be reused)

    def feed(self, data: bytes) -> bytes:
        """The body bytes that ``data`` completes; raises WireError on bad framing."""
        buffer = self._buffer
        buffer += data
        out: list[bytes] = []
        at, size = 0, len(buffer)
        while not self.done:
            if self._state == self._DATA:
                take = min(size - at, self._left)
                if take <= 0:
                    break
                out.append(bytes(buffer[at : at + take]))
                at += take
                self._left -= take
                if self._left:
                    break
                self._state = self._CRLF
            elif self._state == self._CRLF:
                if size - at < 2:
                    break
                if buffer[at : at + 2] != b"\r\n":
                    raise WireError("malformed chunked body (no CRLF after a chunk)")
                at += 2
                self._state = self._SIZE
            else:
                end = buffer.find(b"\r\n", at)
                if end < 0:
                    if size - at > MAX_HEAD_BYTES:
                        raise WireError("malformed chunked body (line too long)")
                    break
                line = bytes(buffer[at:end])
                at = end + 2
                if self._state == self._TRAILER:
                    self.done = not line
                    continue
                try:
                    length = int(line.split(b";", 1)[0].strip() or b"0", 16)
                except ValueError:
                    raise WireError("malformed chunked body (bad chunk size)") from None
                if length < 0:
                    raise WireError("malformed chunked body (bad chunk size)")
                self._state, self._left = (self._DATA, length) if length else (self._TRAILER, 0)
        del buffer[:at]
        self.leftover = self.done and bool(buffer)
        return b"".join(out)


class WirePool:
    """Keep-alive connections per (host, port, tls)."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int, bool], list[_Connection]] = {}

    def _release(self, key: tuple[str, int, bool], connection: _Connection) -> None:
        idle = self._idle.setdefault(key, [])
        if len(idle) < MAX_IDLE_PER_HOST:
            idle.append(connection)
        else:
            connection.close()

    async def _connect(self, key: tuple[str, int, bool]) -> tuple[_Connection, bool]:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if not connection.reader.at_eof() and not connection.writer.is_closing():
                return connection, True
            connection.close()
        host, port, tls = key
        try:
            # Not ``asyncio.wait_for``: on Python 3.11 a cancellation that arrives as the
            # connection opens is swallowed by it, and the cancelled request would go on to wait
            # for a replica that may never answer. ``asyncio.timeout`` lets it through.
            async with asyncio.timeout(CONNECT_TIMEOUT):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=ssl.create_default_context() if tls else None, limit=READ_LIMIT
                )
        except (OSError, TimeoutError) as exc:
            raise WireConnectError(f"{type(exc).__name__}: {exc}") from None
        return _Connection(reader, writer), False

    async def post(
        self, url: str, body: object, headers: Mapping[str, str] | None = None
    ) -> StreamedResponse:
        """POST ``body`` as JSON; the response once its head arrived (the body is not read)."""
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        key = (parts.hostname or "127.0.0.1", parts.port or (443 if tls else 80), tls)
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [
            f"POST {path} HTTP/1.1",
            f"host: {parts.netloc}",
            "content-type: application/json",
            "accept: text/event-stream, application/json",
            f"content-length: {len(payload)}",
        ]
        for name, value in (headers or {}).items():
            if name.lower() in FRAMING or not _TOKEN.match(name) or "\r" in value or "\n" in value:
                raise ValueError(f"refusing to send header {name!r}")
            lines.append(f"{name}: {value}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        for attempt in range(2):  # a kept-alive connection may have been closed by the server
            connection, reused = await self._connect(key)
            try:
                connection.writer.write(head + payload)
                await connection.writer.drain()
                status, response_headers = await _read_head(connection.reader)
            except (OSError, asyncio.IncompleteReadError, WireError) as exc:
                connection.close()
                if reused and attempt == 0:
                    continue
                raise WireError(f"{type(exc).__name__}: {exc}") from None
            except BaseException:
                connection.close()
                raise
            return StreamedResponse(
                status, response_headers, connection, self, key, _framing=_framing(response_headers)
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise WireError("response head too large") from None
    if len(raw) > MAX_HEAD_BYTES:
        raise WireError("response head too large")
    lines = raw.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if (
        len(status_line) < 2
        or not status_line[0].startswith("HTTP/1.")
        or not status_line[1].isdigit()
    ):
        raise WireError(f"not an HTTP/1.1 response: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line[1]), headers


def _framing(headers: Mapping[str, str]) -> str:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return "chunked"
    length = headers.get("content-length")
    if length is not None and length.isdigit():
        return f"length:{length}"
    return "close"
