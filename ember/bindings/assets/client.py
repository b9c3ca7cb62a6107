"""``env.ASSETS`` inside the isolate: ``await env.ASSETS.fetch(request_or_url)``.

Answers as the assets in front of the worker would (the same ``serving`` code, in the
supervisor): a ``Response`` with the asset, a 307 to its canonical path, a 404 or a 304. A
relative URL is resolved against ``http://fakehost`` (only the path matters).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from ember.bindings.base import BindingChannel, BindingSpec
from ember.bindings.streams import ReadableStream
from ember.js_errors import JsTypeError


class AssetsBinding:
    """``env.<binding>`` for a project's static assets."""

    def __init__(self, spec: BindingSpec, channel: BindingChannel) -> None:
        self._name = spec.name
        self._channel = channel

    def __repr__(self) -> str:
        return f"<Fetcher {self._name} (assets)>"

    async def fetch(self, request: Any, init: Mapping[str, Any] | None = None, **kw: Any) -> Any:
        """The assets' answer to ``request`` (a Request, or a URL string)."""
        options = {**(init or {}), **kw}
        if isinstance(request, str):
            url, method, headers = request, "GET", options.get("headers") or {}
        elif hasattr(request, "url") and hasattr(request, "method"):
            url, method, headers = str(request.url), str(request.method), request.headers
        else:
            raise JsTypeError(f"env.{self._name}.fetch(): expected a Request or a URL")
        method = str(options.get("method", method)).upper()
        if url.startswith("/"):
            url = "http://fakehost" + url
        pairs = [[str(k), str(v)] for k, v in _items(options.get("headers", headers))]
        reply = await self._channel.call(self._name, "fetch", [method, url, pairs])
        status, header_pairs, inline = reply.value  # type: ignore[misc]
        body: Any = inline or None
        if reply.stream is not None:
            body = ReadableStream(reply.stream)
        if method == "HEAD" or status in (304, 307):
            body = None
        return _response(body, int(status), [(str(k), str(v)) for k, v in header_pairs])


def _items(headers: Any) -> list[tuple[Any, Any]]:
    if headers is None:
        return []
    if hasattr(headers, "items"):
        return list(headers.items())
    return [tuple(pair) for pair in headers]


def _response(body: Any, status: int, headers: list[tuple[str, str]]) -> Any:
    workers = importlib.import_module("workers")
    # The pairs as they came: a dict kept one Set-Cookie of several (the last).
    return workers.Response(body, status=status, headers=headers)
