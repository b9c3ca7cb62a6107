"""What keeps tenants apart on the shared ``/w/<account>/<worker>/`` path.

Every ``/w/`` URL, the control API and the claim page are one browser origin
(``http://127.0.0.1:PORT``). Left alone, a page of one tenant's worker could read another
tenant's worker with a same-origin ``fetch`` (and that tenant's cookies), or register a Service
Worker over the whole origin (``Service-Worker-Allowed: /``) and read every later request of
that browser to the platform, claim links included. Cloudflare never has this problem: every
worker has its own ``<worker>.<subdomain>.workers.dev`` origin (``workers.dev`` is on the public
suffix list, so each account's subdomain is its own site too); ember's counterpart is the
host-named URL ``http://<worker>.<account>.localhost:PORT/``, which is what browsers should use.

``/w/`` stays for clients that cannot send the name (curl, scripts, wrangler's output pasted
somewhere); for browsers its answers are made harmless, as a platform serving untrusted pages
from its own origin must:

- every answer carries ``Content-Security-Policy: sandbox ...`` without ``allow-same-origin``:
  the page runs as an opaque origin (scripts, forms, popups still work), so its fetches to the
  platform are cross-origin (no reading, no SameSite cookies) and it cannot register a Service
  Worker or touch the origin's storage. Extra CSP headers are enforced together, so the
  worker's own policy still applies and cannot loosen this one;
- a request with ``Service-Worker: script`` (the browser fetching a Service Worker's script) is
  refused, for a browser that does not honour the sandbox; ``Service-Worker-Allowed`` and
  ``Clear-Site-Data`` (which acts on the whole origin) are dropped;
- ``Set-Cookie`` paths are moved under the worker's prefix (``Path=/`` becomes
  ``Path=/w/acme/hello``; a cookie without a Path gets that one) and ``Domain`` is dropped, as
  a path-prefix proxy does, so one worker's cookies are neither sent to nor overwritten by
  another's;
- the browser's jar is still one per host (Chromium keeps 180 cookies, then evicts), so a
  worker setting hundreds of cookies would push out everybody else's. Every worker cookie
  there is ``Priority=Low`` (whatever Priority the worker gave) while the platform's own are
  High (api/hardening.py), so Chromium evicts the flood's Low cookies before the claim
  cookie; and one answer carries at most ``MAX_SET_COOKIES`` of them, the rest dropped and
  told to the operator.

What remains: other tenants' cookies on ``/w/`` are Low too, so a worker that floods over
several answers (a redirect chain) can still push them out, and browsers other than Chromium
ignore Priority and evict the oldest. Host-named URLs, one cookie jar per worker, are the
answer; ``/w/`` is a convenience for clients that cannot send the name.

Non-browser clients see the same status and body as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember.runtime.cookies import with_priority

# The tokens a normal page needs; never allow-same-origin (that would undo the sandbox).
SANDBOX_POLICY = (
    "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox "
    "allow-modals allow-downloads allow-pointer-lock allow-presentation "
    "allow-top-navigation-by-user-activation"
)
# Service-Worker-Allowed widens a Service Worker's scope past the worker's path; Clear-Site-Data
# acts on the whole origin, so one worker could wipe every tenant's cookies and the claim cookie.
DROPPED = frozenset({b"service-worker-allowed", b"clear-site-data"})
# Set-Cookie headers one /w/ answer may carry: far past what a real page sets at once (sites
# with heavy analytics set a dozen or two), well under Chromium's 180 per host.
MAX_SET_COOKIES = 50


def service_worker_script(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the request is a browser fetching a Service Worker's script."""
    return any(
        name.lower() == b"service-worker" and value.strip().lower() == b"script"
        for name, value in headers
    )


def service_worker_refusal(host_named_url: str) -> str:
    return (
        "Service Workers cannot be registered under /w/: every account's workers share this "
        "origin there, so one worker's Service Worker would see the others' requests. Open "
        f"the worker at its own origin, {host_named_url}, to use one."
    )


def scoped_cookie(value: bytes, prefix: str) -> bytes:
    """One ``Set-Cookie`` value with its Path under ``prefix`` (``/w/acme/hello``) and no
    Domain. A cookie without a Path gets the prefix: the browser's default is the request's
    directory, which for ``/w/acme/hello`` (no trailing slash) is ``/w/acme``, every worker of
    the account."""
    text = value.decode("latin-1")
    first, *attributes = text.split(";")
    kept: list[str] = [first]
    pathed = False
    for attribute in attributes:
        name, _, rest = attribute.strip().partition("=")
        key = name.strip().lower()
        if key == "domain":
            continue
        if key == "path":
            path = rest.strip()
            inner = path if path.startswith("/") and path != "/" else ""
            kept.append(f" Path={prefix}{inner}")
            pathed = True
            continue
        kept.append(attribute)
    if not pathed:
        kept.append(f" Path={prefix}")
    return ";".join(kept).encode("latin-1")


def guarded_headers(
    headers: list[tuple[bytes, bytes]], prefix: str
) -> tuple[list[tuple[bytes, bytes]], int]:
    """A worker's response headers as the shared path sends them (see the module docstring),
    and how many ``Set-Cookie`` headers past ``MAX_SET_COOKIES`` were dropped."""
    out: list[tuple[bytes, bytes]] = []
    cookies = dropped = 0
    for name, value in headers:
        key = name.lower()
        if key in DROPPED:
            continue
        if key == b"set-cookie":
            cookies += 1
            if cookies > MAX_SET_COOKIES:
                dropped += 1
                continue
            value = with_priority(scoped_cookie(value, prefix), "Low")
        out.append((name, value))
    out.append((b"content-security-policy", SANDBOX_POLICY.encode()))
    return out, dropped


def guarded_send(send: Any, prefix: str, operator: Callable[[str], None] | None = None) -> Any:
    """``send`` with every response start passed through ``guarded_headers``; an answer that
    lost Set-Cookie headers is told once to ``operator`` (the operator's log)."""

    async def guarded(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers, dropped = guarded_headers(list(message["headers"]), prefix)
            if dropped and operator is not None:
                operator(
                    f"[ember] {prefix}: dropped {dropped} of {MAX_SET_COOKIES + dropped} "
                    f"Set-Cookie headers (at most {MAX_SET_COOKIES} per answer on /w/)"
                )
            message = {**message, "headers": headers}
        await send(message)

    return guarded
