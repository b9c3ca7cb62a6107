"""The caller's request id (``x-request-id``) in the model server's request log.

The AI gateway sends its own request id (``cf-ai-req-id``, what a worker's caller sees) to the
replica as ``x-request-id``; with ``--log-requests`` the replica's "Finish" line names it, so an
operator can tie a handler's call to the replica that served it. The header is only logged
(never used as the engine's request id: two callers sending the same one would collide there),
and only when it is a plain token of at most ``MAX_CHARS`` characters. It also names the answer
(``answer_id``), as vLLM's does, and every answer carries it back as ``x-request-id`` (a fresh
uuid4 hex when the caller sent none usable), as vLLM's ``XRequestIdMiddleware`` answers: the
``openai`` clients read ``_request_id`` from that header. ``/abort_request`` finds a request by its
answer's id as well (``answer_ids.py``).
"""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar
from typing import Any

MAX_CHARS = 128
_PLAIN = re.compile(rb"[A-Za-z0-9._:\-]{1,%d}" % MAX_CHARS)
# Set per HTTP request by ``CallerIdMiddleware``; read where the request's generation ends.
CALLER_ID: ContextVar[str | None] = ContextVar("caller_id", default=None)


class CallerIdMiddleware:
    """Pure ASGI: ``x-request-id`` into ``CALLER_ID`` for the request's task, and back out on
    the answer's headers."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        caller = None
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                if _PLAIN.fullmatch(value):
                    caller = value
                break
        # Set for every request, None included: a pipelined request's task starts inside the
        # one before it and would otherwise inherit that caller's id.
        CALLER_ID.set(caller.decode("ascii") if caller is not None else None)
        echoed = caller or uuid.uuid4().hex.encode("ascii")

        async def send_with_id(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or ())
                message = {**message, "headers": [*headers, (b"x-request-id", echoed)]}
            await send(message)

        await self.app(scope, receive, send_with_id)


def answer_id(prefix: str, fallback: str) -> str:
    """The answer's ``id``: ``prefix`` and the caller's ``x-request-id`` when it sent one (vLLM's
    ``_base_request_id``: ``chatcmpl-ID``), else ``fallback`` (the engine's own request id)."""
    caller = CALLER_ID.get()
    return prefix + caller if caller else fallback


def caller_note() -> str:
    """``, x_request_id=...`` for the log line (empty without one)."""
    caller = CALLER_ID.get()
    return f", x_request_id={caller}" if caller else ""
