"""``Content-Encoding: gzip`` and ``br`` as workerd handles them, on both sides of a worker.

A fetched response the upstream sent gzip- or br-encoded (br: workerd's
``brotli_content_encoding`` flag, on by default since 2024-04-29) keeps its
``content-encoding`` header, and its body arrives still encoded (``EncodedBody``): the handler
reads it decoded, here in the isolate, so the decoder's memory is the tenant's (a brotli
decoder's window is up to 16 MiB, the upstream's choice); returned unread
(``return await fetch(url)``, ``Response(resp.body, headers=resp.headers)``) the encoded bytes
go to the client as they came, with their length. A response the handler builds with a
``content-encoding: gzip`` or ``br`` header has its body compressed on the way out (workerd's
``encodeBody: "automatic"``, the default), so ``Response(new_text, headers=resp.headers)``
stays valid; ``encodeBody: "manual"`` sends bytes already compressed as they are. Other
encodings are not workerd's to apply: their bytes pass as they are (identity).
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

import brotli

from ember.js_errors import JsTypeError
from ember.runtime.zslices import slices

GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib's gzip container
PIECE_BYTES = 64 * 1024  # the most decoded bytes made at once
# What one brotli call may make: the binding stops growing its output buffer once past this,
# which can leave it up to one growth step over (32 KiB at this limit, measured).
_BROTLI_LIMIT = PIECE_BYTES // 4
# Brotli for bodies compressed on the way out: a dynamic-content quality, and the window kj
# compresses with by default (2**19 bytes), not brotli's 4 MiB.
_BROTLI_QUALITY = 5
_BROTLI_LGWIN = 19
CODINGS = ("gzip", "br")  # the codings workerd decodes and applies itself


def coding_of(value: str | None) -> str | None:
    """The coding workerd codes itself that a ``content-encoding`` value names, else None."""
    if value is None:
        return None
    name = value.strip().lower()
    return name if name in CODINGS else None


class EncodedBody:
    """A fetched body still gzip- or br-encoded: iterating it gives the decoded bytes; ``raw``
    is the encoded source (bytes, or the supervisor's stream), for a body passed through
    unread; ``coding`` which of the two."""

    __slots__ = ("raw", "coding", "_started")

    def __init__(self, raw: bytes | AsyncIterable[bytes], coding: str) -> None:
        if coding not in CODINGS:
            raise ValueError(f"coding must be one of {CODINGS}, not {coding!r}")
        self.raw = raw
        self.coding = coding
        self._started = False

    @property
    def untouched(self) -> bool:
        """Nobody read it: the encoded bytes can still go out as they came."""
        if self._started:
            return False
        return isinstance(self.raw, bytes) or bool(getattr(self.raw, "untouched", False))

    def __aiter__(self) -> AsyncIterator[bytes]:
        self._started = True
        return _decoded(self.raw) if self.coding == "gzip" else _unbrotlied(self.raw)


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


async def _unbrotlied(raw: bytes | AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """``raw`` decoded from brotli in pieces of at most PIECE_BYTES, each made only when the
    reader asks (``Decompressor.process``'s ``output_buffer_limit``, brotli >= 1.2). Errors
    are kj's: a stream cut short, bytes that are not brotli, or bytes after the stream's end
    (kj starts a new stream there; Python's binding cannot say where one ended, so a second
    concatenated stream is an error here too, not only junk)."""
    decoder = brotli.Decompressor()
    chunks = [raw] if isinstance(raw, bytes) else raw
    seen = False
    try:
        async for encoded in _iterate(chunks):
            data = bytes(encoded)
            seen = seen or bool(data)
            while True:
                # Once a call stops at the limit, the next ones take no input until the
                # decoder has handed out what it holds (brotli's contract for ``process``).
                out = decoder.process(data, output_buffer_limit=_BROTLI_LIMIT)
                data = b""
                if not out:  # it needs more input (or the stream is over)
                    break
                for start in range(0, len(out), PIECE_BYTES):
                    yield out[start : start + PIECE_BYTES]
    except brotli.error as exc:  # kj's words, then the binding's
        raise JsTypeError(f"Brotli decompression failed. ({exc})") from None
    if seen and not decoder.is_finished():  # no bytes at all: an empty body, read as ""
        raise JsTypeError("Brotli compressed stream ended prematurely.")


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


def brotli_bytes(body: bytes) -> bytes:
    """A whole body compressed, as workerd sends a body under ``content-encoding: br``."""
    return brotli.compress(body, quality=_BROTLI_QUALITY, lgwin=_BROTLI_LGWIN)


async def brotli_stream(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """A streamed body brotli-compressed chunk by chunk, each chunk flushed (as ``gzip_stream``)."""
    encoder = brotli.Compressor(quality=_BROTLI_QUALITY, lgwin=_BROTLI_LGWIN)
    async for chunk in chunks:
        out = encoder.process(chunk) + encoder.flush()
        if out:
            yield out
    yield encoder.finish()


def output_coding(headers: list[tuple[str, str]], manual: bool) -> str | None:
    """The coding the runtime applies to a response with these headers (gzip or br), if any."""
    if manual:
        return None
    for name, value in headers:
        if name.lower() == "content-encoding":
            return coding_of(value)
    return None


def without_length(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers less any ``content-length``: a compressed body has a length of its own."""
    return [(name, value) for name, value in headers if name.lower() != "content-length"]


def source_of(body: Any) -> Any:
    """An ``EncodedBody`` nobody read: its encoded source; anything else: itself."""
    if isinstance(body, EncodedBody) and body.untouched:
        return body.raw
    return body
