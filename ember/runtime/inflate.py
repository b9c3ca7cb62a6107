"""An upstream body decoded in the supervisor, in bounded pieces, only as it is read.

httpx's ``aiter_bytes`` decodes each raw chunk whole: one 64 KiB read of a deflate bomb became
64 MiB in the supervisor, for every concurrent subrequest. Here a raw chunk is decoded into
pieces of at most ``PIECE_BYTES`` (zlib's ``max_length``, the rest kept as its
``unconsumed_tail``), and the next piece is made only when the reader asks for it, so each
subrequest holds at most one piece and one raw chunk whatever the compression ratio.

Only the zlib codings (gzip, x-gzip, deflate) are decoded here: a zlib decoder holds a 32 KiB
window. A brotli decoder holds one of up to 16 MiB, chosen by the upstream (one request that
held 40 fetches of an 809-byte br body open grew this shared process by 641 MiB), so br
passes as it came, with its header, and ``fetch()`` decodes it in the isolate as workerd does
(``isolate/encoding.py``), in the tenant's memory. zstd's Python bindings have no bounded
output, so a body under any other coding (or several) passes as it came too.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import httpx

# Fed to zlib in slices: at a gzip member's end zlib copies the rest of its input.
from ember.runtime.zslices import slices

PIECE_BYTES = 64 * 1024  # the most decoded bytes made at once
# A gzip member costs a decoder whatever its size (about 0.7 us of CPU: an empty member is 20
# bytes, so 32 MiB of them was 1.2 s of the shared supervisor's CPU even fed in slices, where
# the same bytes unencoded cost 0.02 s). Past FREE_MEMBERS, a body must average at least
# MEMBER_BYTES per member: more than an empty member's 20, less than a member carrying one
# small event (a server flushing each SSE line as its own member: ~40 bytes; 256 refused such
# streams, review20). At the bound, 32 MiB is ~1 million decoders: under a second of CPU.
FREE_MEMBERS = 1024
MEMBER_BYTES = 32
_GZIP = 16 + zlib.MAX_WBITS
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS
_CODINGS = {"gzip": _GZIP, "x-gzip": _GZIP, "deflate": _ZLIB}


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
    wbits = _CODINGS[coding]
    decoder = zlib.decompressobj(wbits)
    started = False
    members, taken = 1, 0
    async for chunk in raw:
        taken += len(chunk)
        for data in slices(chunk):
            full = False  # the last piece filled PIECE_BYTES: zlib may hold more output
            while data or full:
                if decoder.eof:  # a gzip member ended (a deflate stream's end ends the body)
                    if not data:
                        break
                    members += 1
                    if members > FREE_MEMBERS + taken // MEMBER_BYTES:
                        raise httpx.DecodingError(_too_many_members(members, taken))
                    decoder = zlib.decompressobj(wbits)
                try:
                    piece = decoder.decompress(data, PIECE_BYTES)
                except zlib.error as exc:
                    if wbits == _ZLIB and not started:  # raw deflate, without zlib's header
                        wbits, decoder = _RAW, zlib.decompressobj(_RAW)
                        continue
                    raise httpx.DecodingError(str(exc)) from None
                started = True
                full = len(piece) == PIECE_BYTES
                data = decoder.unconsumed_tail or decoder.unused_data
                if decoder.eof and wbits != _GZIP:
                    # The body ends with its deflate stream (zlib's output is complete at
                    # eof): what follows is not read, as zlib ignores it. Fed on, each chunk
                    # was appended to ``unused_data`` (a copy of all of it): quadratic CPU.
                    if piece:
                        yield piece
                    return
                if piece:
                    yield piece
    tail = decoder.flush()
    if tail:
        yield tail


def _too_many_members(members: int, taken: int) -> str:
    return (
        f"the gzip-encoded body has {members} gzip members in its first {taken} bytes: past "
        f"{FREE_MEMBERS}, at most one per {MEMBER_BYTES} bytes is decoded (each costs a new "
        "decoder, however small)"
    )
