"""A gzip-encoded response decoded at the edge for a client that did not accept gzip.

ember stands where Cloudflare's edge stands for the client. A worker's response under
``content-encoding: gzip`` (an upstream answer passed on unread, or a body workerd compressed
on the way out) reaches a client that accepts gzip as it is; for one that does not (no
``Accept-Encoding``, as ``curl`` without ``--compressed``; ``identity`` only; ``gzip;q=0``) the
edge decodes it on the fly and drops ``content-encoding`` and ``content-length``, keeping
everything else (Cloudflare's "transparent decompression", which ``wrangler dev`` does too).

The body is decoded as it streams: each chunk read from the worker is decoded into pieces of
at most ``CHUNK_BYTES``, and the next is read only once those went out, so memory stays bounded
whatever the compression ratio. The decoded bytes count against the response size limit as a
plain body's do, so a decompression bomb costs no more than the largest body the worker could
stream itself. A body that is not valid gzip is cut as an upstream failure cuts one
(``ResponseAborted``: the connection ends without its terminating chunk).
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn

from ember.runtime.http import HeaderList, HttpResponse, ResponseAborted

GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib's gzip container
CHUNK_BYTES = 64 * 1024  # the most decoded bytes held (and sent) at once
_GZIP_NAMES = ("gzip", "x-gzip")  # x-gzip: RFC 9110's alias
_NO_BODY = (204, 304)


def accepts_gzip(request_headers: HeaderList) -> bool:
    """Whether a request's ``Accept-Encoding`` accepts gzip (RFC 9110 12.5.3): ``gzip`` (or
    ``x-gzip``) with a weight above 0, or ``*`` above 0 where gzip is not named. No header at
    all is taken as no (as Cloudflare's edge and wrangler dev take it: ``curl`` sends none)."""
    values = [v for k, v in request_headers if k.lower() == "accept-encoding"]
    if not values:
        return False
    named: float | None = None
    star: float | None = None
    for item in ",".join(values).split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        weight = _weight(params)
        if coding in _GZIP_NAMES:
            named = weight if named is None else max(named, weight)
        elif coding == "*":
            star = weight
    if named is not None:
        return named > 0
    return star is not None and star > 0


def _weight(params: str) -> float:
    """The ``q`` of one ``Accept-Encoding`` item (1 when absent or unreadable)."""
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 1.0
    return 1.0


def is_gzip_encoded(headers: HeaderList) -> bool:
    """Whether a response is gzip-encoded, and gzip only (what workerd codes itself)."""
    values = [v for k, v in headers if k.lower() == "content-encoding"]
    return len(values) == 1 and values[0].strip().lower() in _GZIP_NAMES


def for_client(
    response: HttpResponse,
    request_headers: HeaderList,
    method: str,
    limit: int,
    over_limit: Callable[[], None],
    broken: Callable[[], None] | None,
) -> HttpResponse:
    """``response`` as it goes to the client that sent ``request_headers``: decoded (see the
    module docstring) if it is gzip-encoded and the client did not accept gzip, else itself.

    ``limit``: the most decoded bytes sent; past it ``over_limit`` runs (it ends the request)
    and the body is cut. ``broken`` (if any) runs when the body turns out not to be valid gzip.
    """
    if not is_gzip_encoded(response.headers) or accepts_gzip(request_headers):
        return response
    response.headers = [
        (k, v)
        for k, v in response.headers
        if k.lower() not in ("content-encoding", "content-length")
    ]
    body = response.body
    if method.upper() != "HEAD" and response.status not in _NO_BODY and body != b"":
        response.body = GunzipStream(body, limit, over_limit, broken)
    return response


class GunzipStream:
    """A gzip body (bytes, or a stream of chunks) decoded in pieces of at most CHUNK_BYTES.

    An async iterator with ``aclose`` (which closes the source), as the HTTP writers read a
    streamed body. Concatenated gzip members decode as one body, as ``gzip.decompress`` does.
    """

    def __init__(
        self,
        source: bytes | AsyncIterator[bytes],
        limit: int,
        over_limit: Callable[[], None],
        broken: Callable[[], None] | None,
    ) -> None:
        self._source: Any = None if isinstance(source, bytes) else source
        self._input = source if isinstance(source, bytes) else b""  # not yet decoded
        self._decoder = zlib.decompressobj(GZIP_WBITS)
        self._seen_input = bool(self._input)
        self._full = False  # the last piece filled CHUNK_BYTES: zlib may hold more output
        self._limit = limit
        self._sent = 0
        self._over_limit = over_limit
        self._broken = broken
        self._ended = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        while not self._ended:
            if self._input or self._full:
                piece = self._decode()
                if piece:
                    return self._count(piece)
                continue
            if self._source is not None:
                try:
                    chunk = await self._source.__anext__()
                except StopAsyncIteration:
                    self._source_done()
                    continue
                if chunk:
                    self._input = bytes(chunk)
                    self._seen_input = True
                continue
            self._source_done()
        raise StopAsyncIteration

    def _decode(self) -> bytes:
        decoder = self._decoder
        if decoder.eof:
            self._full = False
            if not self._input:
                return b""
            # Another gzip member follows the one that ended (or bytes that are no gzip).
            decoder = self._decoder = zlib.decompressobj(GZIP_WBITS)
        try:
            piece = decoder.decompress(self._input, CHUNK_BYTES)
        except zlib.error as exc:
            self._fail(f"the gzip-encoded response body is not valid gzip ({exc})")
        self._full = len(piece) == CHUNK_BYTES
        self._input = decoder.unconsumed_tail or decoder.unused_data
        return piece

    def _source_done(self) -> None:
        """The source ended: so does the body, unless a member was cut short."""
        self._source = None
        if self._seen_input and not self._decoder.eof:
            self._fail("the gzip-encoded response body ended in the middle of its data")
        self._ended = True

    def _count(self, piece: bytes) -> bytes:
        self._sent += len(piece)
        if self._sent > self._limit:
            self._ended = True
            self._over_limit()
            raise ResponseAborted("the response, decoded from gzip, exceeded the size limit")
        return piece

    def _fail(self, message: str) -> NoReturn:
        self._ended = True
        if self._broken is not None:
            self._broken()
        raise ResponseAborted(message)

    async def aclose(self) -> None:
        """Stop reading (the client left, or the body ended or was cut): close the source."""
        self._ended = True
        source, self._source = self._source, None
        if source is not None and hasattr(source, "aclose"):
            await source.aclose()
