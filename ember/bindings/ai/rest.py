"""Workers AI over HTTP: the REST ``ai/run`` endpoint and the OpenAI-compatible API.

    POST /client/v4/accounts/{account}/ai/run/{model}          Workers AI REST (the model raw,
                                                               @cf/a/b, or %40cf%2Fa%2Fb)
    GET  /client/v4/accounts/{account}/ai/models/search        the model list
    GET  .../ai/models/schema, .../ai/authors/search, .../ai/tasks/search  (catalog_rest.py)
    POST /client/v4/accounts/{account}/ai/v1/chat/completions  OpenAI-compatible
    POST /client/v4/accounts/{account}/ai/v1/responses         OpenAI Responses API
    GET  /client/v4/accounts/{account}/ai/v1/responses/{id}    (responses_front.py; DELETE too)
    GET  /client/v4/accounts/{account}/ai/v1/models[/{model}]
    POST /ai/v1/chat/completions, /ai/v1/responses, GET /ai/v1/responses/{id},
    GET /ai/v1/models[/{model}]                                the same, for ``ember dev``

REST answers use the ``{result, success, errors, messages}`` envelope (``"stream": true`` answers
with server-sent events in the binding's format); the body is the inputs, plus an optional
``options`` object (``rejectIfBusy``, ``gateway``...); ``?queueRequest=true`` queues a batch as
``options.queueRequest`` does. ``x-session-affinity`` pins a replica.
A request whose client disconnects is cancelled, streamed or not (the replica stops generating).
``ai_routes`` builds the routes for any starlette app (``ember serve`` mounts them behind its own
authentication through ``authorize``); ``ai_app`` is a complete app (``ember dev``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ember.bindings.ai.catalog_rest import Authorize, catalog_routes
from ember.bindings.ai.failures import Failure, IncompleteRequest, RequestTooLarge, failure_of
from ember.bindings.ai.fallback_routes import fallback_routes
from ember.bindings.ai.gateway import (
    AIAnswer,
    AIGateway,
    AIRequestFailed,
)
from ember.bindings.ai.model_search import ModelSearch, catalog_entry
from ember.bindings.ai.options import RunOptions, parse_run_options
from ember.bindings.ai.responses_front import create_response
from ember.bindings.ai.rest_replies import (
    event_stream,
    openai_failure,
    openai_model_not_found,
    pass_headers,
    rest_failure,
    with_request_ids,
)
from ember.bindings.ai.tenant import Tenant
from ember.errors import CheckpointError, ConfigError, InvalidModelInput
from ember.models.api.errors import NO_SUCH_MODEL
from ember.models.api.fields import check_body, describe
from ember.models.api.responses_store import ResponseNotFound, check_retrieve, deleted
from ember.models.server.wire import ClientGone, unless_disconnected

MAX_BODY_BYTES = 10 * 2**20
LOCAL_ACCOUNT = "local"
# Starlette does not cancel a handler whose client left, so every call to the gateway races the
# client's disconnect: an abandoned request must not keep a replica generating (and a slot taken
# from the callers still waiting). Nobody reads the answer; 499 is what nginx logs for it.
CLIENT_GONE = 499
# What an OpenAI-compatible POST asks of the gateway: (gateway, tenant, body, options).
Front = Callable[[AIGateway, Tenant, dict[str, Any], RunOptions], Awaitable[AIAnswer]]


async def _local(request: Request, account: str | None, *, inference: bool) -> Tenant:
    return Tenant.of_account(account or LOCAL_ACCOUNT)


def ai_routes(gateway: Callable[[], AIGateway], authorize: Authorize = _local) -> list[Route]:
    """The routes listed in the module docstring, over ``gateway()``."""
    prefix = "/client/v4/accounts/{account}/ai"

    def ready(model: str = "") -> AIGateway:
        """``gateway()``; a configured checkpoint it cannot read fails the request (503, the
        file named) instead of escaping as a bare 500."""
        try:
            return gateway()
        except (CheckpointError, ConfigError) as exc:
            raise AIRequestFailed(failure_of(exc, model)) from None

    def refused(exc: Exception, model: str, tenant: Tenant) -> Failure:
        """The failure to answer for ``exc``, counted and logged once (``AIGateway.refusal``)
        whether the gateway or this front refused the call."""
        try:
            return gateway().refusal(exc, model, tenant)
        except (CheckpointError, ConfigError):  # no gateway to count it in (``ready`` says why)
            return exc.failure if isinstance(exc, AIRequestFailed) else failure_of(exc, model)

    async def run(request: Request) -> Response:
        account = request.path_params["account"]
        model = request.path_params["model"]
        tenant = await authorize(request, account, inference=True)
        try:
            body = await _json_body(request)
            served = ready(model)
            served.require_model(
                model, tenant=tenant
            )  # before the options: an unknown model is a 5007
            options = parse_run_options(body.pop("options", None), model)
            options = replace(options, headers=_affinity(request, options.headers))
            if _query_flag(request, "queueRequest"):
                # batch-api/rest-api.mdx sends the batch flag in the query, not the body.
                options = replace(options, queue_request=True)
            answer = await unless_disconnected(request, served.run(tenant, model, body, options))
        except ClientGone:
            return Response(status_code=CLIENT_GONE)
        except (AIRequestFailed, InvalidModelInput) as exc:
            return rest_failure(refused(exc, model, tenant))
        if answer.stream is not None:
            return event_stream(answer)
        result = answer.json()
        envelope = {"result": result, "success": True, "errors": [], "messages": []}
        return JSONResponse(envelope, headers=pass_headers(answer))

    def openai_post(front: Front) -> Callable[[Request], Awaitable[Response]]:
        """A POST route of the OpenAI-compatible API over ``front`` (chat or responses)."""

        async def endpoint(request: Request) -> Response:
            account = request.path_params.get("account")
            model = ""
            tenant = await authorize(request, account, inference=True)
            try:
                body = await _json_body(request)
                model = str(body.get("model") or "")
                served = ready(model)
                if model:  # a missing model is chat()'s 5006 naming /model
                    served.require_model(model, tenant=tenant)  # before the options, as ai/run
                options = parse_run_options(body.pop("options", None), model)
                options = replace(options, headers=_affinity(request, options.headers))
                answer = await unless_disconnected(request, front(served, tenant, body, options))
            except ClientGone:
                return Response(status_code=CLIENT_GONE)
            except ResponseNotFound as exc:  # an unknown previous_response_id: a refused call
                served.count_refusal(model, 404, failure_of(exc, model).code.code, tenant)
                return JSONResponse(exc.openai_body(), status_code=404)
            except (AIRequestFailed, InvalidModelInput) as exc:
                failure = refused(exc, model, tenant)
                if failure.code is NO_SUCH_MODEL:
                    return openai_model_not_found(model, failure.hint)
                return openai_failure(failure)
            if answer.stream is not None:
                return event_stream(answer)
            return Response(
                answer.body, media_type="application/json", headers=pass_headers(answer)
            )

        return endpoint

    async def stored_response(request: Request) -> Response:
        """``GET`` / ``DELETE .../v1/responses/{id}``: the tenant's stored response."""
        tenant = await authorize(request, request.path_params.get("account"), inference=False)
        response_id = request.path_params["response_id"]
        try:
            store = ready().responses
            if request.method == "DELETE":
                store.delete(tenant.data, response_id)
                return JSONResponse(deleted(response_id))
            check_retrieve(request.query_params)
            stored = store.get(tenant.data, response_id)
        except AIRequestFailed as exc:
            return openai_failure(exc.failure)
        except ResponseNotFound as exc:
            return JSONResponse(exc.openai_body(), status_code=404)
        except InvalidModelInput as exc:
            return openai_failure(failure_of(exc, ""))
        return JSONResponse(stored.response)

    chat = openai_post(lambda gateway, tenant, body, options: gateway.chat(tenant, body, options))
    responses = openai_post(create_response)

    def model_cards() -> list[dict[str, Any]]:
        rows = ready().models()
        created = int(time.time())
        # max_model_len: the name vLLM and SGLang give the served context (clients read it).
        return [
            {
                "object": "model",
                "created": created,
                "owned_by": "ember",
                "max_model_len": row["max_context"],
                **row,
            }
            for row in rows
        ]

    async def models(request: Request) -> Response:
        await authorize(request, request.path_params.get("account"), inference=False)
        try:
            return JSONResponse({"object": "list", "data": model_cards()})
        except AIRequestFailed as exc:
            return openai_failure(exc.failure)

    async def model(request: Request) -> Response:
        """``GET /models/{id}``: the official client's ``models.retrieve(id)``."""
        await authorize(request, request.path_params.get("account"), inference=False)
        wanted = request.path_params["model"]
        try:
            cards = model_cards()
        except AIRequestFailed as exc:
            return openai_failure(exc.failure)
        card = next((c for c in cards if c["id"] == wanted), None)
        if card is None:
            return openai_model_not_found(wanted)
        return JSONResponse(card)

    async def search(request: Request) -> Response:
        await authorize(request, request.path_params.get("account"), inference=False)
        try:
            query = ModelSearch.parse(request.query_params)
            rows = ready().models()
        except AIRequestFailed as exc:
            return rest_failure(exc.failure)
        except InvalidModelInput as exc:
            return rest_failure(failure_of(exc, ""))
        found = query.select([catalog_entry(row) for row in rows])
        info = {"page": query.page, "per_page": query.per_page, "count": len(found)}
        return JSONResponse(
            {"result": found, "result_info": info, "success": True, "errors": [], "messages": []}
        )

    served = [
        Route(prefix + "/run/{model:path}", run, methods=["POST"]),
        Route(prefix + "/models/search", search, methods=["GET"]),
        *catalog_routes(prefix, ready, authorize, rest_failure),
        Route(prefix + "/v1/chat/completions", chat, methods=["POST"]),
        Route(prefix + "/v1/responses", responses, methods=["POST"]),
        Route(prefix + "/v1/responses/{response_id}", stored_response, methods=["GET", "DELETE"]),
        Route(prefix + "/v1/models", models, methods=["GET"]),
        Route(prefix + "/v1/models/{model:path}", model, methods=["GET"]),
        Route("/ai/v1/chat/completions", chat, methods=["POST"]),
        Route("/ai/v1/responses", responses, methods=["POST"]),
        Route("/ai/v1/responses/{response_id}", stored_response, methods=["GET", "DELETE"]),
        Route("/ai/v1/models", models, methods=["GET"]),
        Route("/ai/v1/models/{model:path}", model, methods=["GET"]),
    ]
    # Last: any other path or method under the AI prefixes, in the caller's error shape.
    return with_request_ids([*served, *fallback_routes(prefix, served, authorize)])


def ai_app(gateway: Callable[[], AIGateway], authorize: Authorize = _local) -> Starlette:
    """A starlette app serving ``ai_routes``."""
    return Starlette(routes=ai_routes(gateway, authorize))


PREFIXES = ("/client/v4/accounts/", "/ai/v1/")


def is_ai_path(path: str) -> bool:
    """True for the paths ``ai_app`` answers (the dev server sends only these to it)."""
    if path.startswith("/ai/v1/"):
        return True
    return path.startswith("/client/v4/accounts/") and "/ai/" in path


async def _json_body(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RequestTooLarge("/", f"the body has {declared} bytes; at most {MAX_BODY_BYTES}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise RequestTooLarge("/", f"the body exceeds {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        value = json.loads(raw) if raw.strip() else None
    except (ValueError, UnicodeDecodeError):
        raise InvalidModelInput("/", "Invalid value at '/': the body is not JSON") from None
    except RecursionError:  # the parser recurses per level: it was a 500
        raise InvalidModelInput(
            "/", "Invalid value at '/': the body is nested too deeply"
        ) from None
    if value is None:  # no body (or a bare null): the platform's 3003, not a 5006 on '/'
        raise IncompleteRequest("body", "Request is missing headers or body: body")
    if not isinstance(value, dict):
        raise InvalidModelInput(
            "/", f"Invalid value at '/': expected a JSON object, got {describe(value)}"
        )
    # A lone surrogate or a value nested past what a replica reads: a 5006 naming the field
    # here, not a 503 from re-encoding it for the replica (or the replica's 500).
    check_body(value)
    return value


def _query_flag(request: Request, name: str) -> bool:
    """``?name=true`` on the URL."""
    return request.query_params.get(name, "").lower() in ("true", "1")


def _affinity(request: Request, headers: Any) -> dict[str, str]:
    merged = dict(headers)
    session = request.headers.get("x-session-affinity")
    if session and not any(k.lower() == "x-session-affinity" for k in merged):
        merged["x-session-affinity"] = session
    return merged
