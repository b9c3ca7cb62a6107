"""The ``client/v4`` API as a Starlette app over one ``ControlPlane``.

``create_api_app`` returns an app serving ``/client/v4/...`` (Cloudflare's API, the tail
WebSocket) and ``/claim-preview`` (the claim page). ``ember serve`` mounts it on its single port
beside the worker router; tests run it under uvicorn on an ephemeral loopback port.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount

from ember.errors import EmberError
from ember.runtime.api import (
    routes_assets,
    routes_auth,
    routes_kv,
    routes_kv_values,
    routes_misc,
    routes_provisioning,
    routes_schedules,
    routes_scripts,
    routes_secrets,
    routes_tail,
)
from ember.runtime.api.envelope import ember_error_handler, fail_at, unexpected_error_handler
from ember.runtime.api.hardening import PlatformHeaders
from ember.runtime.api.live import LiveHooks, StateOnly
from ember.runtime.api.uploads import Uploads
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.tail_events import TailHub

API_PREFIX = "/client/v4"


def api_routes() -> list[BaseRoute]:
    """Every client/v4 route, relative to the API prefix."""
    return [
        *routes_auth.ROUTES,
        *routes_provisioning.API_ROUTES,
        *routes_scripts.ROUTES,
        *routes_assets.ROUTES,
        *routes_schedules.ROUTES,
        *routes_secrets.ROUTES,
        *routes_kv.ROUTES,
        *routes_kv_values.ROUTES,
        *routes_tail.ROUTES,
        *routes_tail.WS_ROUTES,
        *routes_misc.ROUTES,
    ]


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return fail_at(
            request, 405, 7001, f"Method {request.method} not allowed for {request.url.path}"
        )
    if exc.status_code == 404:
        return fail_at(request, 404, 7003, f"No route for the URI {request.url.path}")
    return fail_at(request, exc.status_code, 10001, str(exc.detail))


async def _client_gone(request: Request, exc: Exception) -> Response:
    # The client left before its body was read, or was cut off at server.body_timeout (408,
    # runtime/bodyclock.py): nobody hears an answer, and it is no platform error to log.
    return Response(status_code=400)


def create_api_app(
    plane: ControlPlane,
    tail_hub: TailHub | None = None,
    extra_routes: list[BaseRoute] | None = None,
    *,
    live: LiveHooks | None = None,
    first_routes: list[BaseRoute] | None = None,
    uploads: Uploads | None = None,
) -> Starlette:
    """``first_routes`` are matched before the API's mount (full paths, e.g. the AI routes);
    ``uploads`` runs Worker uploads off the event loop (a default one over ``plane``)."""
    app = Starlette(
        routes=[
            *(first_routes or []),
            Mount(API_PREFIX, routes=api_routes()),
            *routes_provisioning.PAGE_ROUTES,
            *(extra_routes or []),
        ],
        exception_handlers={
            EmberError: ember_error_handler,
            HTTPException: _http_error,
            ClientDisconnect: _client_gone,
            Exception: unexpected_error_handler,
        },
        middleware=[Middleware(PlatformHeaders)],  # no-store, no framing, no Referer
    )
    app.state.plane = plane
    app.state.tail_hub = tail_hub or TailHub()
    app.state.live = live or StateOnly()
    app.state.uploads = uploads or Uploads(plane)
    app.state.api_prefix = API_PREFIX
    return app
