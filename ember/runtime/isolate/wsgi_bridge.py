"""Serve a WSGI application (Flask, Django, Bottle...) from a fetch handler, as Python Workers'
``workers.wsgi`` module does::

    from workers import WorkerEntrypoint, wsgi

    class Default(WorkerEntrypoint):
        async def fetch(self, request):
            return await wsgi.fetch(app, request, self.env)

or, in one line as Cloudflare's Flask and Django pages do, ``Default = wsgi.entrypoint(app)``.

The environ follows PEP 3333, plus ``environ["workers.env"]``: the bindings, as the platform
passes them. The app runs on the isolate's event loop, synchronously, as it does on the
platform; its body iterable is sent to the client as it yields, and closed (PEP 3333) when the
body ends or the client goes away.
"""

from __future__ import annotations

import io
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

from ember.runtime.isolate.api import NULL_BODY_STATUSES, Request, Response
from ember.runtime.isolate.headers import Headers

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_END = object()


def native_string(text: str) -> str:
    """PEP 3333's "native string": the UTF-8 bytes of ``text``, one character per byte."""
    return text.encode("utf-8").decode("latin-1")


def build_environ(request: Request, env: Any, body: bytes) -> dict[str, Any]:
    """The WSGI environ of ``request`` whose body was read into ``body``."""
    url = urlsplit(request.url)
    scheme = url.scheme or "http"
    environ: dict[str, Any] = {
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": native_string(unquote(url.path or "/")),
        "QUERY_STRING": url.query,
        "SERVER_NAME": url.hostname or "localhost",
        "SERVER_PORT": str(url.port or (443 if scheme == "https" else 80)),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "workers.env": env,
    }
    for name, value in request.headers.items():
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = "HTTP_" + key
        # Repeated headers fold into one comma-separated value (PEP 3333 leaves it to servers).
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    if body and "CONTENT_LENGTH" not in environ:
        environ["CONTENT_LENGTH"] = str(len(body))
    return environ


class _StartResponse:
    """PEP 3333's ``start_response``, and the ``write`` callable it returns."""

    def __init__(self) -> None:
        self.status: str | None = None
        self.headers: list[tuple[str, str]] = []
        self.written: list[bytes] = []

    def __call__(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        if exc_info is not None:
            try:
                if self.status is not None:  # too late to change the head: re-raise the error
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None
        elif self.status is not None:
            raise AssertionError("start_response() called a second time without exc_info")
        self.status, self.headers = status, list(headers)
        return self.write

    def write(self, data: bytes) -> None:
        if self.status is None:
            raise AssertionError("write() called before start_response()")
        if data:
            self.written.append(bytes(data))


def _close(result: Iterable[bytes]) -> None:
    close = getattr(result, "close", None)  # PEP 3333: the server calls close() if present
    if close is not None:
        close()


async def _stream(
    first: bytes | None, rest: Iterator[bytes], done: Callable[[], None]
) -> AsyncIterator[bytes]:
    try:
        if first:
            yield first
        for chunk in rest:
            if chunk:
                yield bytes(chunk)
    finally:
        done()


async def fetch(app: WSGIApp, request: Request, env: Any = None, ctx: Any = None) -> Response:
    """Serve ``request`` with the WSGI ``app``; ``env`` becomes ``environ["workers.env"]``."""
    if not isinstance(request, Request):
        raise TypeError(f"wsgi.fetch expects the handler's request, found {type(request).__name__}")
    environ = build_environ(request, env, await request.bytes())
    start = _StartResponse()
    result = app(environ, start)
    chunks = iter(result)
    try:
        # Apps may call start_response only when they yield their first chunk.
        first: Any = next((chunk for chunk in chunks if chunk), _END)
    except BaseException:
        _close(result)
        raise
    if start.status is None:
        _close(result)
        raise RuntimeError("The WSGI application did not call start_response()")
    code, _, reason = start.status.partition(" ")
    status = int(code)
    headers = Headers(start.headers)
    if status in NULL_BODY_STATUSES:
        _close(result)
        return Response(None, status=status, status_text=reason or None, headers=headers)
    head = b"".join(start.written)
    lead = head + (bytes(first) if first is not _END else b"")
    rest: Iterator[bytes] = chunks if first is not _END else iter(())
    body = _stream(lead, rest, lambda: _close(result))
    return Response(body, status=status, status_text=reason or None, headers=headers)


def entrypoint(app: WSGIApp) -> type:
    """A ``Default`` WorkerEntrypoint class that serves every request with ``app``: the
    platform's ``wsgi.entrypoint``, documented as equal to a WorkerEntrypoint whose fetch is
    ``await wsgi.fetch(app, request, self.env)``."""
    from ember.runtime.isolate.entrypoints import WorkerEntrypoint

    class Default(WorkerEntrypoint):
        async def fetch(self, request: Request) -> Response:
            return await fetch(app, request, self.env, self.ctx)

    return Default
