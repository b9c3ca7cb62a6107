"""Calls wrangler makes around ``delete`` that ember answers with what it has (no Durable
Objects, no dispatch namespaces, no tail consumers)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ember.runtime.api.context import caller, plane_of
from ember.runtime.api.envelope import ok, page_info

ACCOUNT = "/accounts/{account_id}"


async def references(request: Request) -> Response:
    who = caller(request)
    plane_of(request).scripts.get(who.account, request.path_params["name"])
    return ok(
        {
            "services": {"incoming": [], "outgoing": [], "pages_function": False},
            "durable_objects": [],
            "dispatch_outbounds": [],
        }
    )


async def tails_by_consumer(request: Request) -> Response:
    caller(request)
    return ok([])


async def durable_object_namespaces(request: Request) -> Response:
    caller(request)
    return ok([], result_info=page_info([], 1, 1000, 0))


ROUTES = [
    Route(ACCOUNT + "/workers/scripts/{name}/references", references, methods=["GET"]),
    Route(ACCOUNT + "/workers/tails/by-consumer/{name}", tails_by_consumer, methods=["GET"]),
    Route(
        ACCOUNT + "/workers/durable_objects/namespaces", durable_object_namespaces, methods=["GET"]
    ),
]
