"""The loop limit: how many more Worker invocations one request's subrequests may cause.

Cloudflare: "A Worker cannot call itself or another Worker more than 16 times. ... the
CF-EW-Via header's value is an integer that indicates how many invocations are left. Every
time a Worker is invoked, the integer will decrement by 1. If the count reaches zero, a 1019
error is returned." (workers/observability/errors, "Loop limit".)

Here every subrequest carries ``cf-ew-via: N`` (``subrequest.py`` sets it, replacing any the
worker sent: a worker cannot reset its budget), N being what its invocation has left, and a
request that arrives with ``cf-ew-via: 0`` is answered 1019 before any worker runs
(``process.py``). A request from outside (no header) has 16 left, so a worker fetching its own
URL runs 16 nested invocations and the 17th is refused. A client may send the header itself,
but never above 16: it can only shorten its own requests' chains. A loop through a site that
drops the header is not seen, on Cloudflare either.
"""

from __future__ import annotations

from collections.abc import Iterable

LOOP_HEADER = "cf-ew-via"
MAX_NESTED = 16


def loops_left(headers: Iterable[tuple[str, str]]) -> int:
    """What this request's subrequests carry in ``cf-ew-via``: the invocations they may still
    cause (16 from outside); -1 when this request is itself past the limit (1019).

    ``headers``: the request's, names lower-case (as the HTTP server gives them). A value that
    is not a plain number counts as absent (the request came from outside).
    """
    for name, value in headers:
        if name == LOOP_HEADER:
            text = value.strip()
            if not text.isdigit():
                return MAX_NESTED
            # A long number is at least 16 (and int() of a huge one is refused or slow).
            return (min(int(text), MAX_NESTED) if len(text) <= 6 else MAX_NESTED) - 1
    return MAX_NESTED
