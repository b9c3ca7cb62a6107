"""How the AI API's answers and failures become HTTP responses.

A failure answers in the caller's API's shape: Cloudflare's ``{result, success, errors,
messages}`` envelope on the REST routes, OpenAI's ``{"error": ...}`` on the OpenAI-compatible
ones. A streamed answer goes out as server-sent events whose generator is always closed, so the
replica stops generating when the client leaves. Separate from ``rest.py``, which decides what
to answer; this module only shapes it.
"""

from __future__ import annotations

import secrets
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ember.bindings.ai.failures import Failure
from ember.bindings.ai.gateway import AIAnswer

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


class EventResponse(StreamingResponse):
    """A streamed answer whose generator is always closed (so the generation stops)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            closer = getattr(self.body_iterator, "aclose", None)
            if closer is not None:
                await closer()


def pass_headers(answer: AIAnswer) -> dict[str, str]:
    return {k: v for k, v in answer.headers.items() if k.lower() != "content-type"}


def with_request_ids(routes: list[Route]) -> list[Route]:
    """``routes`` (the AI API's: REST ``ai/run``, the OpenAI-compatible ``/ai/v1`` and their
    fallbacks, which answer a wrong method or path under them) answering with ``x-request-id``
    (``RequestIdHeader``)."""
    for route in routes:
        route.app = RequestIdHeader(route.app)
    return routes


class RequestIdHeader:
    """An AI route's app whose every answer, failures and streams included, names its request in
    ``x-request-id``: the answer's ``cf-ai-req-id`` (the gateway's id, in its log and the
    replica's), or a fresh id for a request refused before it got one. openai-node and
    openai-python read it as ``request_id`` / ``_request_id`` (an ``APIError``'s too), as vLLM
    (``--enable-request-id-headers``) and OpenAI send it; Cloudflare documents no request id
    header on its REST API, so ``ai/run`` answers the same."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = _named(message)
            await send(message)

        await self.app(scope, receive, sending)


def _named(start: Message) -> Message:
    headers = list(start.get("headers", ()))
    found = {name.lower(): value for name, value in headers}
    if b"x-request-id" in found:
        return start
    request_id = found.get(b"cf-ai-req-id") or secrets.token_hex(16).encode("ascii")
    return {**start, "headers": [*headers, (b"x-request-id", request_id)]}


def event_stream(answer: AIAnswer) -> Response:
    assert answer.stream is not None  # invariant: a streamed answer
    headers = {**SSE_HEADERS, **pass_headers(answer)}
    return EventResponse(answer.stream, media_type="text/event-stream", headers=headers)


def rest_failure(failure: Failure) -> Response:
    return JSONResponse(failure.rest_body(), status_code=failure.status, headers=failure.headers())


def openai_model_not_found(model: str, hint: str = "") -> Response:
    """An unknown model on the OpenAI-compatible front (``/ai/v1``), answered as OpenAI answers
    it (and ``ember models serve``): 404 ``model_not_found``, which the ``openai`` client raises
    as NotFoundError. No source shows what Workers AI's ``/ai/v1`` answers; its REST ``ai/run``
    answers 5007 with a 400, and still does here."""
    message = f"The model `{model}` does not exist or you do not have access to it."
    message += f" {hint}" if hint else ""  # ember's: what is served, how to serve the id
    error = {"message": message, "type": "invalid_request_error", "param": "model"}
    return JSONResponse({"error": {**error, "code": "model_not_found"}}, status_code=404)


def openai_failure(failure: Failure) -> Response:
    return JSONResponse(
        failure.openai_body(), status_code=failure.status, headers=failure.headers()
    )
