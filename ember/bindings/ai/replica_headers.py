"""The headers of a caller's AI request that reach the replica serving it."""

from __future__ import annotations

from collections.abc import Mapping


def forwarded_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's extra headers a replica may see: ``x-*`` and ``cf-*`` only.

    Never framing or hop-by-hop headers (``content-length``, ``transfer-encoding``, ``host``,
    ``connection``...): replica connections are shared by every tenant, and a tenant's header
    must not be able to change how a request on them is framed.
    """
    return {k: v for k, v in headers.items() if k.lower().startswith(("x-", "cf-"))}


def traced_headers(headers: Mapping[str, str], request_id: str) -> dict[str, str]:
    """``forwarded_headers`` plus ``x-request-id``: the request's ``cf-ai-req-id``, so a
    replica's request log names the id the caller was given. The tenant's own ``x-request-id``
    (any case) is dropped: it must not pass for ember's."""
    kept = {k: v for k, v in forwarded_headers(headers).items() if k.lower() != "x-request-id"}
    return {**kept, "x-request-id": request_id}
