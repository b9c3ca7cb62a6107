"""``urllib3`` (and so ``requests``) in an isolate: each request a blocking subrequest.

The seam is ``HTTPConnectionPool._make_request``, the one place urllib3 puts a request on a
connection; everything above it (retries, redirects, ``PoolManager``, requests' adapters,
sessions and hooks) stays urllib3's own, so each redirect hop is a subrequest of its own. The
pool's connection object is created but never connected: no socket is opened.

Errors are urllib3's: a refused or failed subrequest (policy, DNS, connection, the subrequest
limit) is a ``NewConnectionError`` (``requests.ConnectionError``), no answer in time a
``ReadTimeoutError`` (``requests.ReadTimeout``); mid-body, the socket errors urllib3 maps itself.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from ember.runtime.isolate.outbound import (
    BlockingBody,
    Outbound,
    SubrequestFailed,
    fetch_blocking,
)

_MARK = "_ember_subrequests"


def patch(connectionpool: ModuleType) -> None:
    """Route ``connectionpool.HTTPConnectionPool`` (and its HTTPS subclass) through fetch."""
    pool = connectionpool.HTTPConnectionPool
    if getattr(pool, _MARK, False):
        return
    pool._make_request = _make_request
    setattr(pool, _MARK, True)


def _make_request(
    self: Any,
    conn: Any,
    method: str,
    url: str,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    retries: Any = None,
    timeout: Any = None,
    chunked: bool = False,
    response_conn: Any = None,
    preload_content: bool = True,
    decode_content: bool = True,
    enforce_content_length: bool = True,
) -> Any:
    from urllib3._collections import HTTPHeaderDict
    from urllib3.exceptions import NewConnectionError, ReadTimeoutError
    from urllib3.response import HTTPResponse

    limits = self._get_timeout(timeout)
    connect, read = _seconds(limits.connect_timeout), _seconds(limits.read_timeout)
    wait = None if connect is None and read is None else (connect or 0.0) + (read or 0.0)
    request = Outbound(method, _absolute(self, url), _pairs(headers), _bytes(body))
    try:
        head, stream = fetch_blocking(request, wait)
    except SubrequestFailed as exc:
        if exc.kind == "timeout":
            raise ReadTimeoutError(self, url, f"Read timed out. (read timeout={read})") from None
        raise NewConnectionError(conn, f"Failed to establish a new connection: {exc}") from None
    stream.set_timeout(read)
    message = http.client.HTTPMessage()
    for name, value in head.headers:
        message[name] = value
    return HTTPResponse(
        body=stream,
        headers=HTTPHeaderDict(head.headers),
        status=head.status,
        version=11,
        version_string="HTTP/1.1",
        reason=head.reason,
        preload_content=preload_content,
        decode_content=decode_content,
        # What requests reads cookies from (``_original_response.msg``).
        original_response=_OriginalResponse(message, method, stream),  # type: ignore[arg-type]
        pool=self,
        connection=response_conn,
        msg=message,
        retries=retries,
        enforce_content_length=enforce_content_length,
        request_method=method,
        request_url=url,
    )


class _OriginalResponse:
    """The parts of ``http.client.HTTPResponse`` urllib3 and requests read from a response."""

    def __init__(self, msg: http.client.HTTPMessage, method: str, body: BlockingBody) -> None:
        self.msg = msg
        self._method = method
        self._body = body

    def close(self) -> None:
        self._body.close()

    def isclosed(self) -> bool:
        return self._body.closed


def _absolute(pool: Any, target: str) -> str:
    if "://" in target:  # a proxy-style absolute target
        return target
    host = f"[{pool.host}]" if ":" in pool.host else pool.host
    default = 443 if pool.scheme == "https" else 80
    port = "" if pool.port in (None, default) else f":{pool.port}"
    return f"{pool.scheme}://{host}{port}{target}"


def _pairs(headers: Mapping[str, str] | None) -> list[tuple[str, str]]:
    if headers is None:
        return []
    items = headers.iteritems() if hasattr(headers, "iteritems") else headers.items()
    return [(_text(name), _text(value)) for name, value in items]


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _bytes(body: Any) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if hasattr(body, "read"):
        return _bytes(body.read())
    if isinstance(body, Iterable):  # a generator: urllib3 would have sent it chunked
        return b"".join(_bytes(part) or b"" for part in body)
    raise TypeError(f"cannot send a body of type {type(body).__name__}")


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None
