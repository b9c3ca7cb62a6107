"""How the AI API's answers and failures become HTTP responses.

A failure answers in the caller's API's shape: Cloudflare's ``{result, success, errors,
messages}`` envelope on the REST routes, OpenAI's ``{"error": ...}`` on the OpenAI-compatible
ones. A streamed answer goes out as server-sent events whose generator is always closed, so the
replica stops generating when the client leaves. Separate from ``rest.py``, which decides what
to answer; this module only shapes it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

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


def with_request_id(answer: AIAnswer) -> AIAnswer:
    """The answer with ``x-request-id`` beside ``cf-ai-req-id`` (the same id): the OpenAI-
    compatible routes' clients (openai-node, openai-python) read ``_request_id`` from it, as
    vLLM and OpenAI send it."""
    if not answer.request_id:
        return answer
    return replace(answer, headers={**answer.headers, "x-request-id": answer.request_id})


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
