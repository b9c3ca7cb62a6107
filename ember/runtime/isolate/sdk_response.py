"""``workers.Response`` and ``workers.fetch``: the Python SDK's response, whose ``headers`` are
a copy.

Cloudflare's SDK ``Response`` is Pyodide's ``FetchResponse``
(workerd ``src/pyodide/internal/workers-api/src/workers/_workers.py``), and its ``headers``
is ``Object.fromEntries(js_response.headers.entries()).to_py()``: a new ``dict`` at each
read, with lower-case names (repeated values joined with ", ", one Set-Cookie kept). So
``resp.headers["Content-Type"]`` and a missing name raise ``KeyError``, and
``resp.headers["x"] = "y"`` changes nothing; ``resp.headers.get("content-type")`` and
``Response(body, headers=resp.headers)`` work. ``js.Response`` / ``js.fetch`` keep the live,
case-insensitive JS ``Headers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ember.runtime.isolate import api


class Response(api.Response):
    """The SDK's ``Response``: as ``js.Response``, but ``headers`` reads as a ``dict`` copy."""

    @property
    def headers(self) -> Any:
        """A copy: lower-case names to values, as Pyodide's ``FetchResponse.headers``."""
        return dict(self._headers.entries())

    @headers.setter
    def headers(self, value: Any) -> None:
        api.Response.headers.fset(self, value)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"<Response {self.status}>"


async def fetch(
    resource: str | api.Request, init: Mapping[str, Any] | None = None, **kw: Any
) -> Response:
    """``workers.fetch``: ``fetch`` answering with the SDK's ``Response``."""
    return await api._fetch(Response, resource, init, kw)
