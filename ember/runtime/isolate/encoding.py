"""``Content-Encoding: gzip`` as workerd handles it, on both sides of a worker.

A fetched response the upstream sent gzip-encoded keeps its ``content-encoding`` header, and
its body arrives still encoded (``GzipBody``): the handler reads it decoded, but returned unread
(``return await fetch(url)``, ``Response(resp.body, headers=resp.headers)``) the encoded bytes
go to the client as they came, with their length. A response the handler builds with a
``content-encoding: gzip`` header has its body compressed on the way out (workerd's
``encodeBody: "automatic"``, the default), so ``Response(new_text, headers=resp.headers)``
stays valid; ``encodeBody: "manual"`` sends bytes already compressed as they are. Other
encodings are not workerd's to apply: their bytes pass as they are (identity).
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Any

from ember.js_errors import JsTypeError

GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib's gzip container
PIECE_BYTES = 64 * 1024  # the most decoded bytes made at once
SLICE_BYTES = 4 * 1024  # the most encoded bytes fed to zlib at once (see ``slices``)


def is_gzip(value: str | None) -> bool:
    """Whether a ``content-encoding`` header's value is the one workerd codes (``gzip``)."""
    return value is not None and value.strip().lower() == "gzip"


class GzipBody:
    """A fetched body still gzip-encoded: iterating it gives the decoded bytes; ``raw`` is the
    encoded source (bytes, or the supervisor's stream), for a body passed through unread."""

    __slots__ = ("raw", "_started")

    def __init__(self, raw: bytes | AsyncIterable[bytes]) -> None:
        self.raw = raw
        self._started = False

    @property
    def untouched(self) -> bool:
        """Nobody read it: the encoded bytes can still go out as they came."""
        if self._started:
            return False
        return isinstance(self.raw, bytes) or bool(getattr(self.raw, "untouched", False))

    def __aiter__(self) -> AsyncIterator[bytes]:
        self._started = True
        return _decoded(self.raw)


async def _decoded(raw: bytes | AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """``raw`` decoded in pieces of at most PIECE_BYTES (zlib's ``max_length``, the rest kept as
    its ``unconsumed_tail``), each made only when the reader asks: a small body that decodes to
    many MiB is never held whole (one 20 KB chunk became a 20 MiB one, 503 memory_limit).

    Concatenated gzip members (``cat a.gz b.gz``, RFC 1952 2.2) are one body, as workerd reads
    them: a member's end starts a new decoder on the bytes after it (zlib's ``unused_data``),
    which must be gzip too."""
    decoder = zlib.decompressobj(GZIP_WBITS)
    chunks = [raw] if isinstance(raw, bytes) else raw
    seen = False
    try:
        async for encoded in _iterate(chunks):
            seen = seen or bool(encoded)
            for data in slices(encoded):
                full = False  # the last piece filled PIECE_BYTES: zlib may hold more output
                while data or full:
                    if decoder.eof:
                        if not data:  # the member ended exactly with that piece
                            break
                        decoder = zlib.decompressobj(GZIP_WBITS)  # the next member
                    piece = decoder.decompress(data, PIECE_BYTES)
                    data = decoder.unconsumed_tail or decoder.unused_data
                    full = len(piece) == PIECE_BYTES
                    if piece:
                        yield piece
        tail = decoder.flush()
    except zlib.error as exc:  # workerd's words, then zlib's
        raise JsTypeError(f"Gzip decompression failed. ({exc})") from None
    if tail:
        yield tail
    if not decoder.eof and seen:  # no bytes at all: an empty body, read as ""
        raise JsTypeError("Gzip compressed stream ended prematurely.")


def slices(chunk: bytes) -> Iterator[memoryview]:
    """``chunk`` in views of at most SLICE_BYTES, as zlib is fed: at a gzip member's end zlib
    copies the rest of its input into ``unused_data``, so a chunk fed whole was copied once
    per member (quadratic: 32 MiB of empty 20-byte members cost 2.6 s of CPU in 64 KiB
    chunks, more in larger ones)."""
    view = memoryview(chunk)
    for start in range(0, len(view), SLICE_BYTES):
        yield view[start : start + SLICE_BYTES]


async def _iterate(chunks: Iterable[bytes] | AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    if isinstance(chunks, list):
        for chunk in chunks:
            yield chunk
    else:
        async for chunk in chunks:  # type: ignore[union-attr]
            yield chunk


def gzip_bytes(body: bytes) -> bytes:
    """A whole body compressed, as workerd sends a body under ``content-encoding: gzip``."""
    return gzip.compress(body, compresslevel=6)


async def gzip_stream(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """A streamed body compressed chunk by chunk (each chunk flushed: a stream that pauses,
    server-sent events, reaches the client as it is written, not when the buffer fills)."""
    encoder = zlib.compressobj(6, zlib.DEFLATED, GZIP_WBITS)
    async for chunk in chunks:
        out = encoder.compress(chunk) + encoder.flush(zlib.Z_SYNC_FLUSH)
        if out:
            yield out
    yield encoder.flush()


def wants_encoding(headers: list[tuple[str, str]], manual: bool) -> bool:
    """Whether a response with these headers goes out gzip-compressed by the runtime."""
    if manual:
        return False
    return any(name.lower() == "content-encoding" and is_gzip(value) for name, value in headers)


def without_length(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers less any ``content-length``: a compressed body has a length of its own."""
    return [(name, value) for name, value in headers if name.lower() != "content-length"]


def source_of(body: Any) -> Any:
    """A ``GzipBody`` nobody read: its encoded source; anything else: itself."""
    if isinstance(body, GzipBody) and body.untouched:
        return body.raw
    return body
