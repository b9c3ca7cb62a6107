"""Headers on every answer of the platform itself (the client/v4 API, the claim page).

The platform shares ``http://HOST:PORT`` with the ``/w/`` worker paths (sandboxed, see
ember/runtime/platform/shared_origin.py), and its answers hold what must not travel: API tokens,
claim pages, account data. So nothing is cached (a shared machine's browser cache, a proxy), no
page can be framed (clickjacking the claim button), no Referer carries a URL on, nothing is
sniffed into HTML or embedded by another origin, and the CSP lets a platform page load nothing
and post only to itself.
A header the answer already has is kept (an SSE stream's ``no-cache``). Every cookie the
platform sets (the claim cookie) is ``Priority=High``: worker cookies on ``/w/`` are Low, so a
worker's cookie flood is evicted before them (ember/runtime/cookies.py).
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import MutableHeaders

from ember.runtime.cookies import with_priority

PLATFORM_HEADERS = {
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    # No other origin (a sandboxed /w/ page is one) may load an answer as an image or script,
    # nor keep a handle on a platform window it opened.
    "cross-origin-resource-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
    "content-security-policy": (
        "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}


def harden(headers: MutableHeaders) -> None:
    for name, value in PLATFORM_HEADERS.items():
        headers.setdefault(name, value)
    raw = headers.raw  # the answer's own list: changed in place
    for index, (name, value) in enumerate(raw):
        if name.lower() == b"set-cookie":
            raw[index] = (name, with_priority(value, "High"))


class PlatformHeaders:
    """ASGI middleware: ``harden`` on every HTTP response start."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def hardened(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                harden(MutableHeaders(scope=message))
            await send(message)

        await self.app(scope, receive, hardened)
