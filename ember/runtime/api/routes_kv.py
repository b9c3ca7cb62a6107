"""KV namespaces (metadata): list, create, get, rename, delete."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ember.runtime.api import serializers
from ember.runtime.api.context import caller, json_body, plane_of
from ember.runtime.api.envelope import ok
from ember.runtime.api.paging import paged
from ember.runtime.deployments.errors import InvalidRequest

NAMESPACES = "/accounts/{account_id}/storage/kv/namespaces"
MAX_PER_PAGE = 1000


async def list_namespaces(request: Request) -> Response:
    who = caller(request)
    order = request.query_params.get("order", "title")
    if order not in ("title", "id"):
        raise InvalidRequest("order must be 'title' or 'id'")
    descending = request.query_params.get("direction", "asc") == "desc"
    found = plane_of(request).namespaces.list(who.account, descending=descending)
    if order == "id":
        found.sort(key=lambda n: n.id, reverse=descending)
    return paged(request, [serializers.namespace(n) for n in found], max_per_page=MAX_PER_PAGE)


async def create_namespace(request: Request) -> Response:
    who = caller(request)
    body = await json_body(request)
    title = body.get("title") if isinstance(body, dict) else None
    if not isinstance(title, str):
        raise InvalidRequest('expected {"title": "<namespace title>"}')
    return ok(serializers.namespace(plane_of(request).namespaces.create(who.account, title)))


async def get_namespace(request: Request) -> Response:
    who = caller(request)
    found = plane_of(request).namespaces.get(who.account, request.path_params["namespace_id"])
    return ok(serializers.namespace(found))


async def rename_namespace(request: Request) -> Response:
    who = caller(request)
    body = await json_body(request)
    title = body.get("title") if isinstance(body, dict) else None
    if not isinstance(title, str) or not title.strip():
        raise InvalidRequest('expected {"title": "<new title>"}')
    renamed = plane_of(request).namespaces.rename(
        who.account, request.path_params["namespace_id"], title
    )
    return ok(serializers.namespace(renamed))


async def delete_namespace(request: Request) -> Response:
    who = caller(request)
    plane_of(request).namespaces.delete(who.account, request.path_params["namespace_id"])
    return ok(None)


ROUTES = [
    Route(NAMESPACES, list_namespaces, methods=["GET"]),
    Route(NAMESPACES, create_namespace, methods=["POST"]),
    Route(NAMESPACES + "/{namespace_id}", get_namespace, methods=["GET"]),
    Route(NAMESPACES + "/{namespace_id}", rename_namespace, methods=["PUT"]),
    Route(NAMESPACES + "/{namespace_id}", delete_namespace, methods=["DELETE"]),
]
