"""An upstream body decoded in the supervisor, in bounded pieces, only as it is read.

httpx's ``aiter_bytes`` decodes each raw chunk whole: one 64 KiB read of a deflate bomb became
64 MiB in the supervisor, for every concurrent subrequest. Here a raw chunk is decoded into
pieces of at most ``PIECE_BYTES`` (zlib's ``max_length``, the rest kept as its
``unconsumed_tail``), and the next piece is made only when the reader asks for it, so each
subrequest holds at most one piece and one raw chunk whatever the compression ratio.

The zlib codings (gzip, x-gzip, deflate) and brotli (br, as workerd decodes it) are decoded
here: brotli's ``Decompressor.process`` takes an ``output_buffer_limit`` (brotli >= 1.2), and
each call's output is cut into pieces of at most PIECE_BYTES. zstd's Python bindings have no
bounded output, so a body under any other coding (or several) passes as it came, with its
``content-encoding`` header.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import brotli
import httpx

PIECE_BYTES = 64 * 1024  # the most decoded bytes made at once
# What one brotli call may make: the binding stops growing its output buffer once past this,
# which can leave it up to one growth step over (32 KiB at this limit, measured).
_BROTLI_LIMIT = PIECE_BYTES // 4
_GZIP = 16 + zlib.MAX_WBITS
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS
_CODINGS = {"gzip": _GZIP, "x-gzip": _GZIP, "deflate": _ZLIB, "br": 0}


def decodable(response: httpx.Response) -> str | None:
    """How the body is encoded: "" for not at all, a zlib coding's name, or None for a coding
    (or a chain of them) decoded nowhere here."""
    values = [
        part.strip().lower()
        for value in response.headers.get_list("content-encoding")
        for part in value.split(",")
        if part.strip() and part.strip().lower() != "identity"
    ]
    if not values:
        return ""
    if len(values) == 1 and values[0] in _CODINGS:
        return values[0]
    return None


async def inflated(raw: AsyncIterator[bytes], coding: str) -> AsyncIterator[bytes]:
    """``raw`` (the body as sent) decoded from ``coding`` in pieces of at most PIECE_BYTES.

    Undecodable bytes raise ``httpx.DecodingError``, as ``aiter_bytes`` did. "deflate" is zlib's
    wrapper, or raw deflate where a server sends that (httpx reads both); the body ends where
    its deflate stream does. Concatenated gzip members decode as one body."""
    if coding == "br":
        async for piece in _unbrotli(raw):
            yield piece
        return
    wbits = _CODINGS[coding]
    decoder = zlib.decompressobj(wbits)
    started = False
    async for chunk in raw:
        data = bytes(chunk)
        full = False  # the last piece filled PIECE_BYTES: zlib may hold more output
        while data or full:
            try:
                piece = decoder.decompress(data, PIECE_BYTES)
            except zlib.error as exc:
                if wbits == _ZLIB and not started:  # raw deflate, without zlib's header
                    wbits, decoder = _RAW, zlib.decompressobj(_RAW)
                    continue
                raise httpx.DecodingError(str(exc)) from None
            started = True
            full = len(piece) == PIECE_BYTES
            data = decoder.unconsumed_tail
            if decoder.eof and wbits != _GZIP:
                # The body ends with its deflate stream (zlib's output is complete at eof): what
                # follows is not read, as zlib ignores it. Fed on, each chunk was appended to
                # ``unused_data`` (a copy of all of it): quadratic CPU, and all of it held.
                if piece:
                    yield piece
                return
            if decoder.eof and decoder.unused_data:
                data = decoder.unused_data
                decoder = zlib.decompressobj(wbits)
            if piece:
                yield piece
    tail = decoder.flush()
    if tail:
        yield tail


async def _unbrotli(raw: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``raw`` decoded from brotli in pieces of at most PIECE_BYTES; a stream cut short or
    corrupt raises ``httpx.DecodingError``."""
    decoder = brotli.Decompressor()
    seen = False
    async for chunk in raw:
        data = bytes(chunk)
        seen = seen or bool(data)
        while True:
            try:
                # Once a call stops at the limit, the next ones take no input until the
                # decoder has handed out what it holds (brotli's contract for ``process``).
                out = decoder.process(data, output_buffer_limit=_BROTLI_LIMIT)
            except brotli.error as exc:
                raise httpx.DecodingError(f"the brotli-encoded body is not valid ({exc})") from None
            data = b""
            if not out:  # it needs more input (or the stream is over)
                break
            for start in range(0, len(out), PIECE_BYTES):
                yield out[start : start + PIECE_BYTES]
    if seen and not decoder.is_finished():
        raise httpx.DecodingError("the brotli-encoded body ended in the middle of its data")
