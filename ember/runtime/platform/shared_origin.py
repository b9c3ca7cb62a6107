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
  another's (though a flood of them can push others out of the browser's per-host jar).

Non-browser clients see the same status and body as before.
"""

from __future__ import annotations

from typing import Any

# The tokens a normal page needs; never allow-same-origin (that would undo the sandbox).
SANDBOX_POLICY = (
    "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox "
    "allow-modals allow-downloads allow-pointer-lock allow-presentation "
    "allow-top-navigation-by-user-activation"
)
# Service-Worker-Allowed widens a Service Worker's scope past the worker's path; Clear-Site-Data
# acts on the whole origin, so one worker could wipe every tenant's cookies and the claim cookie.
DROPPED = frozenset({b"service-worker-allowed", b"clear-site-data"})


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


def guarded_headers(headers: list[tuple[bytes, bytes]], prefix: str) -> list[tuple[bytes, bytes]]:
    """A worker's response headers as the shared path sends them (see the module docstring)."""
    out: list[tuple[bytes, bytes]] = []
    for name, value in headers:
        key = name.lower()
        if key in DROPPED:
            continue
        out.append((name, scoped_cookie(value, prefix) if key == b"set-cookie" else value))
    out.append((b"content-security-policy", SANDBOX_POLICY.encode()))
    return out


def guarded_send(send: Any, prefix: str) -> Any:
    """``send`` with every response start passed through ``guarded_headers``."""

    async def guarded(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": guarded_headers(list(message["headers"]), prefix)}
        await send(message)

    return guarded
