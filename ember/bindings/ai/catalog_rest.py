"""The catalog's other REST routes, as the cloudflare SDK calls them.

    GET /client/v4/accounts/{account}/ai/models/schema?model=ID   ``ai.models.schema.get``
    GET /client/v4/accounts/{account}/ai/authors/search           ``ai.authors.list``
    GET /client/v4/accounts/{account}/ai/tasks/search             ``ai.tasks.list``

They answered 404 before, so code written against the SDK stopped at them. The author and
task rows' fields are not documented (the SDK types them as ``object``): ember answers
``{id, name, description}``, the shape the platform gives a model's ``task``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ember.bindings.ai.failures import failure_of
from ember.bindings.ai.gateway import AIGateway, AIRequestFailed
from ember.bindings.ai.io_schema import model_io_schema
from ember.bindings.ai.model_search import TASK, author_of
from ember.bindings.ai.tenant import Tenant
from ember.errors import InvalidModelInput
from ember.models.api.errors import InvalidRequestField


class Authorize(Protocol):
    """(request, account id from the path or None) -> the tenant the request is for.

    ``inference``: the request asks a model for an answer (``ai/run``, chat, responses), which
    the platform counts against the account's AI requests; listings and lookups (the model
    list, schemas, a stored response) are not inference and are never counted.
    """

    def __call__(
        self, request: Request, account: str | None, *, inference: bool
    ) -> Awaitable[Tenant]: ...


TASK_DESCRIPTION = "Models that continue text or a chat: the task of every model ember serves."


def catalog_routes(
    prefix: str,
    ready: Callable[[], AIGateway],
    authorize: Authorize,
    failure: Callable[[Any], Response],
) -> list[Route]:
    """The routes in the module docstring; ``failure`` renders a ``Failure`` as REST does."""

    async def schema(request: Request) -> Response:
        await authorize(request, request.path_params.get("account"), inference=False)
        model = request.query_params.get("model", "")
        try:
            if not model:
                raise InvalidRequestField("/model", "a model id in the query string", "nothing")
            served = ready()
            served.require_model(model, request=False)
            found = model_io_schema(served.schema(model))
        except AIRequestFailed as exc:
            return failure(exc.failure)
        except InvalidModelInput as exc:
            return failure(failure_of(exc, model))
        return _envelope(found)

    async def authors(request: Request) -> Response:
        await authorize(request, request.path_params.get("account"), inference=False)
        try:
            ids = [row["id"] for row in ready().models()]
        except AIRequestFailed as exc:
            return failure(exc.failure)
        names = sorted({author_of(model) for model in ids} - {""})
        return _envelope(
            [{"id": name, "name": name, "description": _served_by(name, ids)} for name in names]
        )

    async def tasks(request: Request) -> Response:
        await authorize(request, request.path_params.get("account"), inference=False)
        return _envelope([{**TASK, "description": TASK_DESCRIPTION}])

    return [
        Route(prefix + "/models/schema", schema, methods=["GET"]),
        Route(prefix + "/authors/search", authors, methods=["GET"]),
        Route(prefix + "/tasks/search", tasks, methods=["GET"]),
    ]


def _served_by(author: str, ids: list[str]) -> str:
    mine = [model for model in ids if author_of(model) == author]
    return f"{len(mine)} model(s) served here: {', '.join(mine)}"


def _envelope(result: Any) -> Response:
    return JSONResponse({"result": result, "success": True, "errors": [], "messages": []})
