"""Cloudflare's response envelope and the mapping from ember errors to it.

``{"success", "errors": [{"code", "message"}], "messages", "result", "result_info"?}``. wrangler
prints a failure as ``message [code: N]``, so the message must say what was wrong and what to do.
Under ``/ai/v1`` (ember's OpenAI-compatible front, which has no Cloudflare API path to match) the
same failures answer in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``: its
clients (the openai SDK) show only that ``message``, so an envelope there read "Error code: 401".
"""

from __future__ import annotations

import logging
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ember.errors import AuthError, EmberError, LimitExceeded, NotFound, UserError
from ember.runtime.api.hardening import harden
from ember.runtime.deployments.errors import ControlPlaneError, RateLimited
from ember.storage import StorageFull

log = logging.getLogger("ember.api")
INTERNAL_CODE = 10002
OPENAI_PREFIX = "/ai/v1"


def ok(result: Any, status: int = 200, result_info: dict[str, Any] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"success": True, "errors": [], "messages": [], "result": result}
    if result_info is not None:
        body["result_info"] = result_info
    return JSONResponse(body, status_code=status)


def fail(status: int, code: int, message: str) -> JSONResponse:
    return JSONResponse(
        {
            "success": False,
            "errors": [{"code": code, "message": message}],
            "messages": [],
            "result": None,
        },
        status_code=status,
    )


def openai_fail(status: int, code: int | str, message: str) -> JSONResponse:
    """OpenAI's error body (``type`` by status, as ``ember.bindings.ai.failures`` types them)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 429:
        kind = "rate_limit_error"
    error = {"message": message, "type": kind, "param": None, "code": code}
    return JSONResponse({"error": error}, status_code=status)


def openai_shaped(path: str) -> bool:
    """Whether errors at ``path`` answer in OpenAI's shape (``/ai/v1`` and below)."""
    return path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/")


def fail_at(request: Request, status: int, code: int, message: str) -> JSONResponse:
    """``fail``, or ``openai_fail`` where the path is OpenAI-compatible."""
    shape = openai_fail if openai_shaped(request.url.path) else fail
    return shape(status, code, message)


def page_info(items: list[Any], page: int, per_page: int, total: int) -> dict[str, int]:
    return {
        "page": page,
        "per_page": per_page,
        "count": len(items),
        "total_count": total,
        "total_pages": max(1, -(-total // per_page)),
    }


def status_and_code(exc: EmberError) -> tuple[int, int]:
    if isinstance(exc, StorageFull):
        return exc.http_status, INTERNAL_CODE
    if isinstance(exc, ControlPlaneError):
        return exc.http_status, exc.cf_code
    if isinstance(exc, NotFound):
        return 404, 10007
    if isinstance(exc, AuthError):
        return 401, 10000
    if isinstance(exc, LimitExceeded):
        return 400, 10037
    if isinstance(exc, UserError):
        return 400, 10001
    return 500, INTERNAL_CODE


async def ember_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, EmberError)
    status, code = status_and_code(exc)
    # A full disk has printed its own line (ember/storage.py), naming the store, not the route;
    # a limit (all isolates busy) is no internal error, and the supervisor printed it.
    if status >= 500 and not isinstance(exc, StorageFull | LimitExceeded):
        log.error("internal error on %s %s: %s", request.method, request.url.path, exc)
    response = fail_at(request, status, code, str(exc))
    retry_after = retry_after_header(exc)
    if retry_after is not None:
        response.headers["retry-after"] = retry_after
    return response


def retry_after_header(exc: EmberError) -> str | None:
    """``Retry-After`` (whole seconds, at least 1) for a rate limit that knows when it ends."""
    if isinstance(exc, RateLimited) and exc.retry_after is not None:
        return str(max(1, math.ceil(exc.retry_after)))
    return None


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    # Never echo internals (paths, SQL) to clients; the log has the traceback.
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    message = "internal error in the ember platform (see its log)"
    response = fail_at(request, 500, INTERNAL_CODE, message)
    harden(response.headers)  # sent past the middleware that adds them to every other answer
    return response
