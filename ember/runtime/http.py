"""HTTP as the supervisor sees it, independent of ASGI: the router converts to and from these."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

HeaderList = list[tuple[str, str]]


@dataclass(slots=True)
class HttpRequest:
    """An incoming request. ``body``: bytes already read, a stream of chunks, or None."""

    method: str
    url: str
    headers: HeaderList
    body: bytes | AsyncIterator[bytes] | None = None
    content_length: int | None = None
    # The path prefix it came by (ember serve's ``/w/<account>/<worker>``), which ``url``
    # leaves out: the worker sees the path after it; its bindings' redirects put it back.
    root_path: str = ""


@dataclass(slots=True)
class HttpResponse:
    """A response: ``body`` is bytes, or a stream the router must iterate (or ``aclose``)."""

    status: int
    headers: HeaderList
    body: bytes | AsyncIterator[bytes] = b""
    outcome: str = "ok"  # "ok", or the tag of the platform error that produced it
    extra: dict[str, str] = field(default_factory=dict)
    status_text: str = ""  # the handler's reason phrase; "" for the standard one


class ClientDisconnected(Exception):
    """The HTTP client went away while its request body was being read."""


class ResponseAborted(Exception):
    """A streamed response could not be completed (the worker failed or exceeded a limit)."""
