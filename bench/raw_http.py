"""A bare asyncio HTTP/1.1 client for the AI benches' load: POST, then the body as it arrives.

On this 2-core box httpx spent ~2 ms of CPU per streamed request (`bench/ai_start.py`), more than
ember's supervisor and isolate together, and so shaped the very TTFTs the benches compare: a burst
of 64 left the client over 100+ ms. This client does only what a streaming benchmark needs:
one kept-alive connection per worker, a request written in one ``write``, the response head
parsed, and the body de-chunked (``Transfer-Encoding: chunked``) or read by ``Content-Length``.
Loopback only; no TLS, redirects or proxies.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit


class HTTPStatusError(RuntimeError):
    pass


@dataclass
class Target:
    host: str
    port: int
    path: str

    @classmethod
    def from_url(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"{url!r}: expected http://host:port/path")
        path = parts.path or "/"
        return cls(parts.hostname, parts.port, path + (f"?{parts.query}" if parts.query else ""))


class Connection:
    """One kept-alive connection; reopened when the server closes it."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(
                self.target.host, self.target.port
            )

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._reader = self._writer = None

    async def post_stream(self, body: dict, headers: dict | None = None) -> AsyncIterator[bytes]:
        """POST ``body`` as JSON; yield the response body's pieces as they arrive."""
        await self.open()
        reader, writer = self._reader, self._writer
        assert reader is not None and writer is not None
        payload = json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"POST {self.target.path} HTTP/1.1\r\nhost: {self.target.host}:{self.target.port}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n{extra}\r\n"
        )
        writer.write(head.encode() + payload)
        status, fields = _parse_head(await reader.readuntil(b"\r\n\r\n"))
        keep = fields.get("connection", "").lower() != "close"
        if fields.get("transfer-encoding", "").lower() == "chunked":
            pieces = _chunked(reader)
        else:
            pieces = _sized(reader, int(fields.get("content-length", "0")))
        if status != 200:
            data = b"".join([piece async for piece in pieces])
            await self.close()
            raise HTTPStatusError(f"HTTP {status}: {data[:300]!r}")
        async for piece in pieces:
            yield piece
        if not keep:
            await self.close()


def _parse_head(raw: bytes) -> tuple[int, dict[str, str]]:
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    fields = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.strip()
    return status, fields


async def _chunked(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, if any
                pass
            return
        data = await reader.readexactly(size + 2)
        yield data[:-2]


async def _sized(reader: asyncio.StreamReader, length: int) -> AsyncIterator[bytes]:
    if length:
        yield await reader.readexactly(length)
