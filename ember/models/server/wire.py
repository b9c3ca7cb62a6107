"""HTTP plumbing shared by the routes: JSON bodies, OpenAI-style errors, SSE responses, and
watching for a client that goes away.

Errors follow OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``: a request
that fails validation is a 400 naming the field (``param``: ``messages.[2].content``), an unknown
model a 404 with code ``model_not_found``, a body that is not JSON (or not sent as
``application/json``) a 400, an oversized body a 413,
a missing or wrong API key a 401, a server still loading a 503, an engine failure a 500.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ember.errors import InvalidModelInput, KVCacheExhausted, UserError
from ember.models.api.errors import openai_error_body, openai_error_for_invalid_input
from ember.models.api.fields import check_body
from ember.models.constrain.compile_client import CompileWorkerFailed
from ember.models.server.sse_response import SSEResponse

MAX_BODY_BYTES = 32 * 2**20
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
T = TypeVar("T")


class HTTPError(Exception):
    """An error response to send as is (status and OpenAI-style body)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = openai_error_body(message, type=type, param=param, code=code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body, status_code=self.status)


class ClientGone(Exception):
    """The client disconnected before the answer was ready."""


def model_not_found(name: object) -> HTTPError:
    return HTTPError(
        404,
        f"The model `{name}` does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )


def error_response(error: BaseException) -> JSONResponse:
    """The response for an exception raised while handling a request."""
    if isinstance(error, HTTPError):
        return error.response()
    if isinstance(error, InvalidModelInput):
        return JSONResponse(openai_error_for_invalid_input(error), status_code=400)
    if isinstance(error, UserError):
        return JSONResponse(openai_error_body(str(error)), status_code=400)
    status, kind = _engine_status(error)
    return JSONResponse(openai_error_body(str(error), type=kind), status_code=status)


def stream_error_payload(error: BaseException) -> dict:
    """The last event of a stream that failed midway (the status line is long gone)."""
    if isinstance(error, InvalidModelInput):
        return openai_error_for_invalid_input(error)
    _, kind = _engine_status(error)
    return openai_error_body(str(error), type=kind)


def _engine_status(error: BaseException) -> tuple[int, str]:
    # Out of KV pages is load (retry later); anything else on the engine's side is a 500.
    # So is a schema compiler that died or stayed busy under a job (compile_client.py).
    retry = isinstance(error, KVCacheExhausted | CompileWorkerFailed)
    return (503 if retry else 500), "server_error"


def _json_media_type(content_type: str | None, *, structured_suffix: bool) -> bool:
    """Whether ``content_type`` names JSON: ``application/json`` (any case, any parameters);
    with ``structured_suffix`` also ``application/*+json``."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media == "application/json":
        return True
    return structured_suffix and media.startswith("application/") and media.endswith("+json")


async def read_json(request: Request, *, structured_suffix: bool = False) -> object:
    """The request's JSON body (``read_json_sized`` without the size)."""
    body, _ = await read_json_sized(request, structured_suffix=structured_suffix)
    return body


async def read_json_sized(
    request: Request, *, structured_suffix: bool = False
) -> tuple[object, int]:
    """The request's JSON body and its size in bytes (400 when it is not sent as JSON or is not
    JSON, 413 past ``MAX_BODY_BYTES``).

    As SGLang: its OpenAI routes refuse any media type but ``application/json``
    (``validate_json_request``), and FastAPI refuses /generate's body unless its type is
    ``application/json`` or ``application/*+json`` (``structured_suffix``); both answer 400.
    A JSON body sent as ``text/plain`` (or with no type) is refused, not guessed at.
    """
    content_type = request.headers.get("content-type")
    if not _json_media_type(content_type, structured_suffix=structured_suffix):
        sent = f"Content-Type {content_type!r}" if content_type else "no Content-Type"
        raise HTTPError(
            400,
            f"Unsupported Media Type: Only 'application/json' is allowed; the request was sent "
            f"with {sent}.",
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _too_large(int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _too_large(size)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise HTTPError(400, "The request body is empty; expected a JSON object.")
    try:
        body = json.loads(raw)
    except RecursionError:
        # The parser recurses once per level: a deep enough body ran out of stack (a 500).
        raise HTTPError(
            400,
            "We could not parse the JSON body of your request: it is nested too deeply. The "
            "body must be a JSON object nested at most a few hundred levels deep.",
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HTTPError(
            400,
            f"We could not parse the JSON body of your request ({exc}). The body must be a "
            "JSON object.",
        ) from None
    check_body(body)
    return body, len(raw)


def _too_large(size: int) -> HTTPError:
    return HTTPError(
        413,
        f"The request body is {size} bytes; at most {MAX_BODY_BYTES} are accepted.",
        code="request_too_large",
    )


async def _disconnected(request: Request) -> None:
    """Returns once the client has gone away (the body was already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """``await work``, cancelling it (and raising ``ClientGone``) if the client disconnects
    first: a non-streaming request whose client left must not keep the engine busy."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    raise ClientGone()


def sse_response(body: AsyncIterator[bytes], *, reference: bool = False) -> StreamingResponse:
    """A ``text/event-stream`` response; ``reference``: starlette's own (``SSEResponse``'s
    slow reference)."""
    kind = StreamingResponse if reference else SSEResponse
    return kind(body, media_type="text/event-stream", headers=SSE_HEADERS)


def empty_response(status: int) -> Response:
    return Response(status_code=status)
