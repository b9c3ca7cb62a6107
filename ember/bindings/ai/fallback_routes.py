"""The AI API's last routes: any other path or method under its prefixes, answered in the shape
the caller's API uses.

An OpenAI-compatible path (``/v1/...``) answers as OpenAI does (404 ``not_found`` or 405
``method_not_allowed``); any other path under ``.../ai/`` as Cloudflare's API does (7000 or
7001 in the envelope). Both say which paths are served, and a 405 which methods its path takes.
Separate from ``rest.py``, which serves the paths; this module only explains the ones it does not.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

from ember.bindings.ai.catalog_rest import Authorize

ANY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
SERVED = (
    "POST /ai/v1/chat/completions, POST /ai/v1/responses, GET and DELETE /ai/v1/responses/{id}, "
    "GET /ai/v1/models[/{model}] (OpenAI-compatible); "
    "POST /client/v4/accounts/{account}/ai/run/{model}, GET .../ai/models/search, "
    "GET .../ai/models/schema?model=ID, GET .../ai/authors/search, GET .../ai/tasks/search (REST)"
)


def _unserved(request: Request) -> str:
    # Without this a client saw a bare 'Error code: 404' (e.g. the openai client's
    # embeddings.create): say which path is not served and which are.
    return f"ember does not serve {request.method} {request.url.path}; it serves {SERVED}"


def _allowed_methods(served: list[Route], request: Request) -> list[str]:
    """The methods a served route takes at this path (empty when no route has the path)."""
    scope = {**request.scope, "method": "\0"}  # any real method would fully match some route
    allowed: set[str] = set()
    for route in served:
        match, _ = route.matches(scope)
        if match is Match.PARTIAL and route.methods:
            allowed |= route.methods - {"HEAD"}
    return sorted(allowed)


def _wrong_method(request: Request, allowed: list[str]) -> str:
    return (
        f"Method {request.method} not allowed for {request.url.path} "
        f"(allowed: {', '.join(allowed)})"
    )


def fallback_routes(prefix: str, served: list[Route], authorize: Authorize) -> list[Route]:
    """The catch-all routes for ``prefix`` (``.../ai``) and ``/ai/v1``, to go after ``served``."""

    async def unserved_openai(request: Request) -> Response:
        await authorize(request, request.path_params.get("account"), inference=False)
        allowed = _allowed_methods(served, request)
        if allowed:
            message = _wrong_method(request, allowed)
            error = {"message": message, "type": "invalid_request_error", "param": None}
            body = {"error": {**error, "code": "method_not_allowed"}}
            return JSONResponse(body, status_code=405, headers={"allow": ", ".join(allowed)})
        error = {"message": _unserved(request), "type": "invalid_request_error", "param": None}
        return JSONResponse({"error": {**error, "code": "not_found"}}, status_code=404)

    async def unserved_rest(request: Request) -> Response:
        await authorize(request, request.path_params.get("account"), inference=False)
        allowed = _allowed_methods(served, request)
        if allowed:
            # Cloudflare's API: 7001 for a method its route does not take (as ember's own
            # control API answers), in the usual envelope, with the methods it does take.
            errors = [{"code": 7001, "message": _wrong_method(request, allowed)}]
            body = {"result": None, "success": False, "errors": errors, "messages": []}
            return JSONResponse(body, status_code=405, headers={"allow": ", ".join(allowed)})
        # Cloudflare's API answers a path it has no route for with code 7000.
        errors = [{"code": 7000, "message": _unserved(request)}]
        body = {"result": None, "success": False, "errors": errors, "messages": []}
        return JSONResponse(body, status_code=404)

    return [
        Route(prefix + "/v1/{rest:path}", unserved_openai, methods=ANY_METHOD),
        Route("/ai/v1/{rest:path}", unserved_openai, methods=ANY_METHOD),
        # The bare prefix too: else starlette redirects it to /ai/v1/ (a 307 clients misread).
        Route("/ai/v1", unserved_openai, methods=ANY_METHOD),
        Route(prefix + "/{rest:path}", unserved_rest, methods=ANY_METHOD),
    ]
