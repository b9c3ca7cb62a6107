"""``httpx`` in an isolate: ``Client`` makes blocking subrequests, ``AsyncClient`` awaits them.

The seam is the default transports' ``handle_request`` / ``handle_async_request``: httpx's
clients, redirects (``follow_redirects``), auth, cookies and event hooks run unchanged above it,
and each hop is a subrequest. Transports a user passes explicitly (``MockTransport``,
``WSGITransport``) are untouched: they open no sockets.

Errors are httpx's: a failed or refused subrequest (policy, DNS, connection, the subrequest
limit) is ``httpx.ConnectError``, no answer in time ``httpx.ReadTimeout``, a body cut off
``httpx.ReadError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

# httpx's internal modules, not ``httpx``: this module is imported while the package itself is
# still being imported (right after ``httpx._transports.default``, see ``__init__.py``).
from httpx._exceptions import ConnectError, ReadError, ReadTimeout
from httpx._models import Response
from httpx._types import AsyncByteStream, SyncByteStream

from ember.runtime.isolate.outbound import (
    BlockingBody,
    Outbound,
    OutboundHead,
    SubrequestFailed,
    fetch_async,
    fetch_blocking,
)
from ember.runtime.mux import InStream, StreamAborted

_MARK = "_ember_subrequests"


def patch(default: ModuleType) -> None:
    """Route ``default.HTTPTransport`` and ``default.AsyncHTTPTransport`` through fetch."""
    if getattr(default.HTTPTransport, _MARK, False):
        return
    default.HTTPTransport.handle_request = _handle_request
    default.AsyncHTTPTransport.handle_async_request = _handle_async_request
    setattr(default.HTTPTransport, _MARK, True)


def _handle_request(self: Any, request: Any) -> Any:
    connect, read = _timeouts(request)
    try:
        head, body = fetch_blocking(_outbound(request, request.read()), _sum(connect, read))
    except SubrequestFailed as exc:
        raise _error(exc, request) from None
    body.set_timeout(read)
    return Response(
        head.status,
        headers=head.headers,
        stream=_SyncStream(body, request),
        extensions=_extensions(head),
    )


async def _handle_async_request(self: Any, request: Any) -> Any:
    connect, read = _timeouts(request)
    outbound = _outbound(request, await request.aread())
    try:
        head, stream = await asyncio.wait_for(fetch_async(outbound), _sum(connect, read))
    except SubrequestFailed as exc:
        raise _error(exc, request) from None
    except TimeoutError:
        raise ReadTimeout("Read timed out waiting for the response", request=request) from None
    return Response(
        head.status,
        headers=head.headers,
        stream=_AsyncStream(stream, request),
        extensions=_extensions(head),
    )


class _SyncStream(SyncByteStream):
    """The body for ``httpx.Response``: chunks as they arrive, httpx's errors on failure."""

    def __init__(self, body: BlockingBody, request: Any) -> None:
        self._body = body
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        while True:
            try:
                chunk = self._body.next_chunk()
            except TimeoutError as exc:
                raise ReadTimeout(str(exc), request=self._request) from None
            except OSError as exc:
                raise ReadError(str(exc), request=self._request) from None
            if not chunk:
                return
            yield chunk

    def close(self) -> None:
        self._body.close()


class _AsyncStream(AsyncByteStream):
    """The async body for ``httpx.Response`` (an ``InStream``; closing it cancels the rest)."""

    def __init__(self, stream: InStream | None, request: Any) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:  # type: ignore[override]
        if self._stream is None:
            return
        try:
            async for chunk in self._stream:
                yield chunk
        except StreamAborted as exc:
            raise ReadError(f"Network connection lost: {exc}", request=self._request) from None

    async def aclose(self) -> None:
        if self._stream is not None:
            await self._stream.aclose()


def _outbound(request: Any, body: bytes) -> Outbound:
    raw = request.headers.raw
    headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw]
    return Outbound(request.method, str(request.url), headers, body or None)


def _extensions(head: OutboundHead) -> dict[str, Any]:
    return {"reason_phrase": head.reason.encode("latin-1", "replace"), "http_version": b"HTTP/1.1"}


def _timeouts(request: Any) -> tuple[float | None, float | None]:
    timeout = request.extensions.get("timeout", {})
    return timeout.get("connect"), timeout.get("read")


def _sum(connect: float | None, read: float | None) -> float | None:
    return None if connect is None and read is None else (connect or 0.0) + (read or 0.0)


def _error(exc: SubrequestFailed, request: Any) -> Exception:
    if exc.kind == "timeout":
        return ReadTimeout(str(exc), request=request)
    return ConnectError(str(exc), request=request)
