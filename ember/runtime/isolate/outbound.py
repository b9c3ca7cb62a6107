"""Subrequests for HTTP client libraries: one typed request in, a head and a body stream out.

The adapters in ``httpclients/`` turn a library's request into an ``Outbound`` and the answer
back into the library's response; this module makes the subrequest the same way ``fetch()``
does (the ``__fetch__`` call, so the supervisor counts it against the subrequest limit and
checks the network policy at every hop), blocking for sync libraries (``blocking.py``) or
awaiting for async ones. Libraries follow redirects themselves (``allow_redirects``,
``follow_redirects``), so every call asks for ``redirect: manual``: each hop is a subrequest
of its own, counted and checked, as each is on the platform.

Failures arrive as ``SubrequestFailed`` with a ``kind`` the adapters map to the library's own
exception classes, so user code that catches ``requests.ConnectionError`` or
``httpx.TimeoutException`` keeps working.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Literal

from ember.bindings.base import ServiceError
from ember.errors import LimitExceeded, UserError
from ember.runtime.isolate.api import SUBREQUEST_BINDING
from ember.runtime.isolate.blocking import BlockingCalls
from ember.runtime.isolate.scope import current_scope
from ember.runtime.mux import InStream, StreamAborted

INLINE_BODY_BYTES = 64 * 1024  # as fetch(): larger bodies go up as a stream
FailureKind = Literal["network", "limit", "timeout"]


class SubrequestFailed(UserError):
    """A library's subrequest failed: ``kind`` says how (the adapters pick the exception)."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Outbound:
    """One HTTP request of a client library, as the supervisor will make it."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes | None = None


@dataclass(frozen=True, slots=True)
class OutboundHead:
    """The answer's status line and headers (the body streams separately)."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    url: str


def fetch_blocking(request: Outbound, timeout: float | None) -> tuple[OutboundHead, BlockingBody]:
    """Make ``request`` from sync code; ``timeout`` bounds the head and each body read."""
    blocking = _blocking()
    inline, upload = _split_body(request.body)
    try:
        reply = blocking.call(
            SUBREQUEST_BINDING, "fetch", _args(request, inline), upload=upload, timeout=timeout
        )
    except (TimeoutError, LimitExceeded, TypeError, ServiceError) as exc:
        raise _failure(exc) from None
    head = _head(reply.value, request.url)
    return head, BlockingBody(blocking, reply.stream, timeout)


async def fetch_async(request: Outbound) -> tuple[OutboundHead, InStream | None]:
    """Make ``request`` from async code (``httpx.AsyncClient``): the body stays a stream."""
    inline, upload = _split_body(request.body)
    try:
        reply = await current_scope().channel.call(
            SUBREQUEST_BINDING, "fetch", _args(request, inline), upload=upload
        )
    except (LimitExceeded, TypeError, ServiceError) as exc:
        raise _failure(exc) from None
    return _head(reply.value, request.url), reply.stream


class BlockingBody(io.RawIOBase):
    """A subrequest's body for sync readers: each read waits (up to the timeout) for a chunk;
    past it, ``TimeoutError``."""

    def __init__(self, blocking: BlockingCalls, stream: InStream | None, timeout: float | None):
        super().__init__()
        self._blocking = blocking
        self._stream = stream
        self._timeout = timeout
        self._left = b""

    def set_timeout(self, timeout: float | None) -> None:
        """How long each body read may wait (a library's read timeout, once the head is in)."""
        self._timeout = timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` from the buffered chunk or the next one; 0 at the end."""
        if not self._left:
            self._left = self.next_chunk()
        size = min(len(buffer), len(self._left))
        buffer[:size] = self._left[:size]
        self._left = self._left[size:]
        return size

    def next_chunk(self) -> bytes:
        """The next chunk as it arrived (``b""`` at the end): for libraries that iterate."""
        if self._left:
            chunk, self._left = self._left, b""
            return chunk
        if self._stream is None or self.closed:
            return b""
        # Errors are the socket errors a library's own reader expects mid-body (each maps them
        # to its read-timeout and broken-connection exceptions).
        try:
            chunk = self._blocking.read(self._stream, self._timeout)
        except StreamAborted as exc:
            raise ConnectionResetError(f"Network connection lost: {exc}") from None
        if not chunk:  # the end: closed, as http.client's response closes itself (urllib3
            self._stream = None  # reads until its body says it is closed)
            self.close()
        return chunk

    def close(self) -> None:
        """Stop reading: a body not read to its end is cancelled in the supervisor."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        super().close()


def _blocking() -> BlockingCalls:
    blocking = getattr(current_scope().channel, "blocking", None)
    if blocking is None:
        raise RuntimeError("this isolate's channel cannot make blocking calls")
    return blocking  # type: ignore[no-any-return]


def _split_body(body: bytes | None) -> tuple[bytes | None, bytes | None]:
    if body is None or len(body) <= INLINE_BODY_BYTES:
        return body, None
    return None, body


def _args(request: Outbound, inline: bytes | None) -> list[object]:
    headers = [[name, value] for name, value in request.headers]
    return [request.method, request.url, headers, "manual", inline]


def _head(value: object, url: str) -> OutboundHead:
    if not isinstance(value, dict):
        raise SubrequestFailed("network", "malformed subrequest reply")
    return OutboundHead(
        status=int(value["status"]),
        reason=str(value.get("statusText", "")),
        headers=[(str(k), str(v)) for k, v in value.get("headers", [])],
        url=str(value.get("url", url)),
    )


def _failure(exc: BaseException) -> SubrequestFailed:
    if isinstance(exc, TimeoutError):
        return SubrequestFailed("timeout", "Read timed out waiting for the response")
    if isinstance(exc, LimitExceeded):
        return SubrequestFailed("limit", str(exc))
    return SubrequestFailed("network", str(exc))
