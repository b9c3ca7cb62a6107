"""The model server's Starlette app: routes, error handling, API key, lifespan.

Endpoints (OpenAI-compatible and SGLang-native, as ``sglang.launch_server`` serves them):

    GET  /health                503 while the model loads, once its engine loop is gone, or
                                while it is stalled (work waits or runs and no step finished
                                for --health-check-timeout s); 200 while it serves
    GET  /health_generate       200 after generating one token end to end (503 when stalled,
                                or when the token takes over --health-check-timeout s)
    GET  /metrics               Prometheus text (SGLang's names)
    GET  /v1/models             the served model; GET /v1/models/{id}
    POST /v1/chat/completions   OpenAI chat completions (stream, tools, JSON mode, logprobs)
    POST /v1/completions        OpenAI text completions
    POST /v1/responses          OpenAI Responses API (over the chat path; responses_routes.py)
    GET  /v1/responses/{id}     a stored response (bounded in-memory store); DELETE drops it
    POST /generate              SGLang native generation (text or input_ids)
    GET  /get_model_info        SGLang model info
    GET  /server_info           SGLang server info (also /get_server_info)
    POST /flush_cache           SGLang: drop the prefix cache while idle
    POST /tokenize, /detokenize vLLM's tokenizer endpoints (tokenize_routes.py)
    POST /v1/tokenize, /v1/detokenize  SGLang's
    POST /abort_request         SGLang: end a request by its rid, or all (admin_routes.py)
    GET  /get_load              SGLang: running and waiting requests, tokens (sglang-router)
    GET  /load, /version        vLLM's server load and version
    GET  /ping                  vLLM's (and SageMaker's) liveness check, as /health (or POST)

The lifespan starts loading the model in a background thread and returns at once, so the port
answers (``/health`` 503) while weights load; shutdown stops the engine thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ember.errors import EmberError
from ember.models.constrain.automaton_cache import SHARED_AUTOMATA
from ember.models.constrain.compile_client import in_process_wanted
from ember.models.server import (
    admin_routes,
    completion_routes,
    openai_routes,
    responses_routes,
    sglang_routes,
    tokenize_routes,
)
from ember.models.server.caller_id import CallerIdMiddleware
from ember.models.server.state import ServerState
from ember.models.server.wire import HTTPError, error_response

# Open with --api-key: health probes and scrapers carry no key. SGLang leaves every path that
# starts with /health open (/health_generate too), vLLM guards only /v1 (so /ping is open).
PUBLIC_PATHS = frozenset({"/metrics", "/ping"})
PUBLIC_PREFIX = "/health"


async def health(request: Request) -> Response:
    state: ServerState = request.app.state.ember
    if state.served is not None:
        engine = state.served.engine
        if engine.is_running:
            stall = state.stall()
            if stall is None:
                return Response(status_code=200)
            # Alive but stuck (a deadlock, a kernel that never returns): its requests would
            # hang until their deadline, so a pool must fail them and replace this server.
            return JSONResponse({"status": "stalled", "error": stall}, status_code=503)
        # The loop is gone: every request would fail, so a pool must stop routing here.
        error = engine.failure or "the engine thread stopped"
        return JSONResponse({"status": "failed", "error": str(error)}, status_code=503)
    if state.load_error is not None:
        return JSONResponse({"status": "failed", "error": str(state.load_error)}, status_code=503)
    return JSONResponse({"status": "loading", "phase": state.phase}, status_code=503)


async def metrics(request: Request) -> Response:
    state: ServerState = request.app.state.ember
    text = state.metrics.render(state.gauges())
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")


async def _handle_error(request: Request, error: Exception) -> Response:
    return error_response(error)


async def _not_found(request: Request, error: Exception) -> Response:
    return HTTPError(404, f"no route {request.url.path}", code="not_found").response()


async def _method_not_allowed(request: Request, error: Exception) -> Response:
    return HTTPError(
        405, f"{request.method} is not allowed on {request.url.path}", code="method_not_allowed"
    ).response()


class ApiKeyMiddleware:
    """``--api-key``: every path but /health*, /ping and /metrics needs ``Authorization: Bearer
    KEY``."""

    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode() if api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.expected is None
            or scope["type"] != "http"
            or scope["path"] in PUBLIC_PATHS
            or scope["path"].startswith(PUBLIC_PREFIX)
            or hmac.compare_digest(dict(scope["headers"]).get(b"authorization", b""), self.expected)
        ):
            await self.app(scope, receive, send)
            return
        response = HTTPError(
            401,
            "Incorrect API key provided; send 'Authorization: Bearer <the server's --api-key>'.",
            code="invalid_api_key",
        ).response()
        await response(scope, receive, send)


Endpoint = Callable[[Request], Awaitable[Response]]


def _routes() -> list[Route]:
    post, get = ["POST"], ["GET"]
    table: list[tuple[str, Endpoint, list[str]]] = [
        ("/health", health, get),
        ("/health_generate", sglang_routes.health_generate, get),
        ("/metrics", metrics, get),
        ("/v1/models", openai_routes.list_models, get),
        ("/v1/models/{model:path}", openai_routes.get_model, get),
        ("/v1/chat/completions", openai_routes.chat_completions, post),
        ("/v1/completions", completion_routes.completions, post),
        ("/v1/responses", responses_routes.create_response, post),
        ("/v1/responses/{response_id}", responses_routes.get_response, ["GET", "DELETE"]),
        ("/generate", sglang_routes.generate, post),
        ("/get_model_info", sglang_routes.get_model_info, get),
        ("/server_info", sglang_routes.server_info, get),
        ("/get_server_info", sglang_routes.server_info, get),
        ("/flush_cache", sglang_routes.flush_cache, ["GET", "POST"]),
        ("/tokenize", tokenize_routes.tokenize, post),
        ("/detokenize", tokenize_routes.detokenize, post),
        ("/v1/tokenize", tokenize_routes.sglang_tokenize, post),
        ("/v1/detokenize", tokenize_routes.sglang_detokenize, post),
        ("/abort_request", admin_routes.abort_request, post),
        ("/get_load", admin_routes.get_load, get),
        ("/load", admin_routes.load, get),
        ("/version", admin_routes.version, get),
        # vLLM's (and SageMaker's) liveness check answers as /health does, on GET or POST.
        ("/ping", health, ["GET", "POST"]),
    ]
    return [Route(path, endpoint, methods=methods) for path, endpoint, methods in table]


def build_app(state: ServerState, *, load: bool = True) -> Starlette:
    """The ASGI app for ``state``; with ``load``, the lifespan starts loading the model."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Schemas' automata are built by a compile worker process while the server serves
        # (automaton_cache.py), unless EMBER_COMPILE_IN_PROCESS=1.
        worker = not in_process_wanted()
        if worker:
            SHARED_AUTOMATA.attach_worker()
        if load:
            state.start_loading()
        try:
            yield
        finally:
            state.close()
            if worker:
                # Off the loop: the last detach waits for the worker's current job (up to its
                # job limit, then 2 s for the process to exit), and other apps may share it.
                await asyncio.to_thread(SHARED_AUTOMATA.detach_worker)

    app = Starlette(
        routes=_routes(),
        middleware=[
            Middleware(CallerIdMiddleware),
            Middleware(ApiKeyMiddleware, api_key=state.settings.api_key),
        ],
        exception_handlers={
            HTTPError: _handle_error,
            EmberError: _handle_error,
            404: _not_found,
            405: _method_not_allowed,
            Exception: _handle_error,  # logged by uvicorn as well, then a JSON 500
        },
        lifespan=lifespan,
    )
    app.state.ember = state
    return app
