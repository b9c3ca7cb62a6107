"""The Workers API inside an isolate: Request, Response and fetch (entrypoints: ``entrypoints.py``).

Shaped after Python Workers' ``workers`` module (and the JS classes that ``js`` exposes), so
handlers written for the platform run unchanged. Bodies are ``bytes`` or async iterables of
``bytes``; a streamed body (a KV stream, a subrequest's body, a model's server-sent events) is
passed to the client as it is produced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from ember.bindings.jsdict import JsDict, to_jsdict, to_plain
from ember.runtime.fields import MAX_STATUS_TEXT, valid_status_text
from ember.runtime.isolate.body import BodyInit, _as_bytes, _Body
from ember.runtime.isolate.cf import incoming_cf
from ember.runtime.isolate.encoding import EncodedBody, coding_of
from ember.runtime.isolate.headers import Headers
from ember.runtime.isolate.scope import current_scope
from ember.runtime.reason_phrases import default_status_text

R = TypeVar("R", bound="Response")
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# A URL that parses without a base: a scheme, and for the special schemes a host after "//".
_ABSOLUTE_URL = re.compile(
    r"^\s*(?:(?:https?|wss?|ftp)://[^/?#\s]+|(?!(?:https?|wss?|ftp|file):)[a-z][a-z0-9+.-]*:"
    r"|file:)",
    re.IGNORECASE,
)
# The Fetch standard's null body statuses (101 and 103 are refused earlier, as out of range).
NULL_BODY_STATUSES = frozenset({204, 205, 304})
SUBREQUEST_BINDING = "__fetch__"
__all__ = ["NULL_BODY_STATUSES", "SUBREQUEST_BINDING", "BodyInit", "Request", "Response", "fetch"]


class Request(_Body):
    """An HTTP request: the one a fetch handler receives, or one built for ``fetch``."""

    def __init__(
        self, input: str | Request, init: Mapping[str, Any] | Request | None = None, **kw: Any
    ) -> None:
        options = {**_request_init(init), **kw}
        if isinstance(input, Request):
            self.url = input.url
            method = options.pop("method", input.method)
            headers = Headers(options.pop("headers", input.headers))
            body = options.pop("body", input._body if not input._body_used else None)
        else:
            self.url = str(input)
            method = options.pop("method", "GET")
            headers = Headers(options.pop("headers", None))
            body = options.pop("body", None)
        self.method = str(method).upper()
        self.headers = headers
        self.redirect = options.pop("redirect", "follow")
        copied = input.cf if isinstance(input, Request) else None  # as new Request(request)
        self._cf: JsDict | None = to_jsdict(dict(options.pop("cf", None) or copied or {}))
        if self.method in ("GET", "HEAD") and body is not None:
            raise TypeError("Request with a GET or HEAD method cannot have a body.")
        self._init_body(body, headers)

    @classmethod
    def new(
        cls, input: str | Request, init: Mapping[str, Any] | Request | None = None, **kw: Any
    ) -> Request:
        """``new Request(input, init)`` in JavaScript style (``init`` may be another request:
        ``new Request(url, request)`` copies its method, headers, body and redirect)."""
        return cls(input, init, **kw)

    @property
    def _headers(self) -> Headers:
        """The live headers, under the name the body code shared with Response reads."""
        return self.headers

    @classmethod
    def _incoming(cls, method: str, url: str, headers: Headers, body: Any) -> Request:
        request = cls.__new__(cls)
        request.url, request.method, request.headers = url, method, headers
        request.redirect, request._cf = "manual", None  # cf: built on first access
        request._body, request._body_used = body, False
        return request

    @property
    def cf(self) -> JsDict:
        """The edge's properties of the request (``request.cf.country``); see ``cf.py``."""
        if self._cf is None:
            self._cf = incoming_cf()
        return self._cf

    @cf.setter
    def cf(self, value: Any) -> None:
        self._cf = to_jsdict(dict(value or {}))

    @property
    def js_object(self) -> Request:
        """Python Workers' handle on the JavaScript request (``asgi.fetch(app,
        request.js_object, env)``); in ember the request is that object itself."""
        return self

    def clone(self) -> Request:
        """A copy with the same body (a streamed one is teed), as JS ``clone()``."""
        copy = Request(self, body=None)
        copy._body, copy.redirect = self._body_for_clone(), self.redirect
        return copy

    def __repr__(self) -> str:
        return f"<Request {self.method} {self.url}>"


class _StaticOrInstance:
    """A name that is one method on the class and another on its instances (see ``json``)."""

    def __init__(self, on_class: str, on_instance: str) -> None:
        self._on_class = on_class
        self._on_instance = on_instance

    def __get__(self, instance: object, owner: type) -> Any:
        if instance is None:
            return getattr(owner, self._on_class)
        return getattr(instance, self._on_instance)


class Response(_Body):
    """An HTTP response. ``body``: str, bytes, an async iterable of bytes, or None."""

    def __init__(
        self,
        body: BodyInit = None,
        status: int | None = None,
        status_text: str | None = None,
        headers: Any = None,
        web_socket: Any = None,
        **kw: Any,
    ) -> None:
        status_text = kw.pop("statusText", status_text)
        encode_body = kw.pop("encodeBody", kw.pop("encode_body", "automatic"))
        if encode_body not in ("automatic", "manual"):
            raise TypeError(f"encodeBody: unexpected value: {encode_body} (automatic or manual)")
        # "manual": a body under content-encoding: gzip is already compressed (encoding.py).
        self._encode_manual = encode_body == "manual"
        if kw:
            raise TypeError(f"Response() got unexpected arguments: {', '.join(sorted(kw))}")
        if web_socket is not None:
            raise TypeError("WebSocket responses are not supported by ember yet")
        self.status = 200 if status is None else int(status)
        if not 200 <= self.status <= 599:
            raise ValueError(
                f"Responses may only be constructed with status codes in the range 200 to 599, "
                f"inclusive (found {self.status})"
            )
        if body is not None and self.status in NULL_BODY_STATUSES:
            # As in Workers: refused here, never sent. A body on a 204 would be written after
            # the head and read by the client as the start of the next response.
            raise TypeError(
                f"Response with null body status cannot have body (status {self.status}: "
                "pass body=None)"
            )
        self.status_text = status_text
        # A copy even of a Headers object, as JS's constructor fills headers of its own:
        # `Response(r.body, headers=r.headers)` and then changing it leave r's headers alone.
        if headers is None:
            self._headers = Headers()
        elif isinstance(headers, Headers):
            self._headers = Headers(headers)
        else:
            self._headers = Headers(to_plain(headers))
        self.url = ""
        self.redirected = False
        self._init_body(body, self._headers)

    @property
    def headers(self) -> Any:
        """The live ``Headers`` (a JS ``Response``'s); ``workers.Response`` reads a copy."""
        return self._headers

    @headers.setter
    def headers(self, value: Any) -> None:
        self._headers = value if isinstance(value, Headers) else Headers(to_plain(value))

    @property
    def ok(self) -> bool:
        """True for 2xx."""
        return 200 <= self.status < 300

    @property
    def status_text(self) -> str:
        """The status text given, else the standard phrase for the status (as workerd reads
        it: ``Response("x", status=404).statusText == "Not Found"``)."""
        if self._status_text is None:
            return default_status_text(self.status)
        return self._status_text

    @status_text.setter
    def status_text(self, value: Any) -> None:
        # Checked where it is set, as workerd's constructor does: a CR or LF would otherwise
        # reach the status line (header injection). None: not given (the standard phrase).
        if value is None:
            self._status_text: str | None = None
            return
        text = str(value)
        if not valid_status_text(text):
            raise TypeError("Invalid statusText")
        if len(text) > MAX_STATUS_TEXT:
            raise TypeError(
                f"Invalid statusText: {len(text)} characters, at most {MAX_STATUS_TEXT} allowed"
            )
        self._status_text = text

    @property
    def statusText(self) -> str:  # noqa: N802 - the JavaScript name
        """The status text (see ``status_text``)."""
        return self.status_text

    @property
    def _wire_status_text(self) -> str:
        """The reason phrase sent to the router: "" for the standard one (its fast path)."""
        return self._status_text or ""

    @classmethod
    def new(
        cls, body: BodyInit = None, init: Mapping[str, Any] | Response | None = None, **kw: Any
    ) -> Response:
        """``new Response(body, init)`` in JavaScript style (``js.Response.new``); ``init`` may
        be another response: ``new Response(r.body, r)`` copies its status, statusText and
        headers (into headers of its own, which can then be changed)."""
        options = {**_response_init(init), **kw}
        status_text = options.pop("statusText", options.pop("status_text", None))
        return cls(body, status_text=status_text, **options)

    @classmethod
    def _json_response(
        cls, data: Any, status: int = 200, status_text: str | None = None, headers: Any = None
    ) -> Response:
        """``Response.json(data)``: a JSON response (``application/json``)."""
        merged = Headers(to_plain(headers) if not isinstance(headers, Headers) else headers)
        if not merged.has("content-type"):
            merged.set("content-type", "application/json")
        payload = json.dumps(to_plain(data), separators=(",", ":"), ensure_ascii=False)
        return cls(payload.encode("utf-8"), status=status, status_text=status_text, headers=merged)

    @classmethod
    def from_json(
        cls, data: Any, status: int = 200, status_text: str | None = None, headers: Any = None
    ) -> Response:
        """The runtime SDK's name for ``Response.json(data)``."""
        return cls._json_response(data, status, status_text or None, headers)

    @classmethod
    def redirect(cls, url: str, status: int = 302) -> Response:
        """A redirect to ``url``, which must be absolute: workerd parses it with no base URL
        and throws ``TypeError: Unable to parse URL: <url>`` for ``/login``, so a relative
        Location that works here would break once deployed."""
        if status not in REDIRECT_STATUSES:
            raise ValueError(
                f"{status} is not a redirect status code. "
                "It must be one of: 301, 302, 303, 307, or 308."
            )
        text = str(url)
        if not _ABSOLUTE_URL.match(text):
            raise TypeError(f"Unable to parse URL: {text}")
        if any(c in text for c in "\r\n\0"):
            raise TypeError(f"Redirect URL cannot contain '\\r', '\\n', or '\\0': {text}")
        return cls(None, status=status, headers={"location": text})

    def clone(self) -> Response:
        """A copy with the same body (a streamed one is teed), as JS ``clone()``."""
        copy = type(self)(None, self.status, self._status_text, Headers(self._headers))
        copy._body = self._body_for_clone()
        copy._encode_manual = self._encode_manual  # its bytes are as compressed as these
        copy.url, copy.redirected = self.url, self.redirected
        return copy

    def replace_body(self, body: BodyInit) -> Response:
        """The runtime SDK's ``replace_body``: same status and headers, a new body."""
        new = type(self)(body, self.status, self._status_text, Headers(self._headers))
        new._encode_manual = self._encode_manual  # (encodeBody: "manual" kept, as the rest)
        return new

    def raise_for_status(self) -> None:
        """Pyodide's ``FetchResponse.raise_for_status()``: OSError for a 4xx or 5xx status."""
        if 400 <= self.status < 600:
            side = "Client" if self.status < 500 else "Server"
            raise OSError(f"{self.status} {side} Error: {self.status_text} for url: {self.url}")

    def __repr__(self) -> str:
        return f"<Response {self.status}>"

    # JS has both under one name: ``Response.json(data)`` builds a response (static), and
    # ``await response.json()`` reads one's body (``await (await fetch(url)).json()``).
    json = _StaticOrInstance("_json_response", "_read_json")  # type: ignore[assignment]


def _request_init(init: Mapping[str, Any] | Request | None) -> dict[str, Any]:
    """A RequestInit as JS reads it. A Request given as the init is read for the members it
    has, as WebIDL reads any object: its method, a copy of its headers, its body (taken from
    it, as its stream would be) and redirect, and ``cf``."""
    if init is None:
        return {}
    if not isinstance(init, Request):
        return {**init}
    return {
        "method": init.method,
        "headers": Headers(init.headers),
        "body": init if init._body is not None else None,  # _init_body takes it (or refuses)
        "redirect": init.redirect,
        "cf": init.cf,
    }


def _response_init(init: Mapping[str, Any] | Response | None) -> dict[str, Any]:
    """A ResponseInit as JS reads it; a Response given as the init gives its status,
    statusText and a copy of its headers (not its body: that is the first argument)."""
    if init is None:
        return {}
    if not isinstance(init, Response):
        return {**init}
    return {
        "status": init.status,
        "statusText": init._status_text,
        "headers": Headers(init._headers),
    }


async def fetch(
    resource: str | Request, init: Mapping[str, Any] | None = None, **kw: Any
) -> Response:
    """An outbound HTTP request, made by the supervisor (counted against the subrequest limit)."""
    return await _fetch(Response, resource, init, kw)


async def _fetch(
    response_class: type[R], resource: str | Request, init: Mapping[str, Any] | None, kw: Any
) -> R:
    """``fetch`` answering with ``response_class`` (``js.Response``, or ``workers.Response``)."""
    scope = current_scope()
    request = (
        resource
        if isinstance(resource, Request) and not (init or kw)
        else Request(resource, init, **kw)
    )
    if request.redirect not in ("follow", "manual", "error"):
        raise TypeError(f"Invalid redirect value {request.redirect!r}: follow, manual or error")
    body = request._take_body() if request._body is not None else None
    inline = body if isinstance(body, bytes) and len(body) <= 64 * 1024 else None
    upload = None if inline is not None or body is None else _as_bytes(body)
    # True: a gzip- or br-encoded answer comes still encoded (EncodedBody), decoded here as it
    # is read (the decoder's memory is the tenant's), or passed through as it came.
    args = [request.method, request.url, request.headers.to_list(), request.redirect, inline, True]
    reply = await scope.channel.call(SUBREQUEST_BINDING, "fetch", args, upload=upload)
    head = reply.value
    if not isinstance(head, dict):
        raise TypeError("malformed subrequest reply")
    response_body: Any = reply.stream if reply.stream is not None else head.get("body")
    status = int(head["status"])
    reason: str | None = str(head.get("statusText", ""))
    if not valid_status_text(reason) or len(reason) > MAX_STATUS_TEXT:  # type: ignore[arg-type]
        reason = ""  # HTTP allows a tab in an upstream's phrase; a Response's must not have one
    if reason == default_status_text(status):
        reason = None  # as workerd's makeHttpResponse: the standard phrase is not kept as given
    response = response_class(
        None,
        status=status,
        status_text=reason,
        headers=Headers._from_pairs([(str(k), str(v)) for k, v in head.get("headers", [])]),
    )
    bodiless = request.method.upper() == "HEAD" or status in (204, 304) or status < 200
    coding = coding_of(response._headers.get("content-encoding"))
    if coding is not None and response_body not in (None, b""):
        if not bodiless:  # whose header describes no bytes here: they read as ""
            response_body = EncodedBody(response_body, coding)
    response._body = response_body
    response.url = str(head.get("url", request.url))
    response.redirected = bool(head.get("redirected", False))
    return response
