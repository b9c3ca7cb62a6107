"""Workers AI over REST on ``ember serve``: ``POST /client/v4/accounts/{a}/ai/run/{model}``.

When ``ember.bindings.ai`` is installed, its routes (Workers AI REST and the OpenAI-compatible
API) are mounted with the platform's authentication: the bearer token must belong to the
account in the path (403 otherwise), the tenant is the account, and a temporary account gets
its AI-requests-per-minute limit. They share the supervisor's gateway (and so the model pool)
with the workers' ``env.AI`` bindings. Without it, the same paths answer with an error that
says the model service is not part of this build.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ember.runtime.api.context import bearer
from ember.runtime.api.envelope import fail
from ember.runtime.deployments.errors import Forbidden
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.platform.quota import AccountRateLimiter
from ember.runtime.services import DeploymentHost, SharedResources

AI_MODULE = "ember.bindings.ai.rest"
AI_PREFIX = "/client/v4/accounts/{account_id}/ai"
UNAVAILABLE_CODE = 7000  # ember's: no such service on this platform


def ai_available() -> bool:
    try:
        return importlib.util.find_spec(AI_MODULE) is not None
    except ModuleNotFoundError:
        return False


def ai_routes_for(plane: ControlPlane, resources: SharedResources) -> list[BaseRoute]:
    """The AI routes for the platform app (placed before the control API's mount)."""
    limiter = AccountRateLimiter("AI_requests")

    async def authorize(request: Request, account_id: str | None) -> str:
        account, _ = plane.accounts.authenticate(bearer(request))
        if account_id is not None and account_id != account.id:
            raise Forbidden()
        per_minute = plane.config.limits_for(account.temporary).ai_requests_per_minute
        if per_minute is not None:
            limiter.acquire(account.id, per_minute)
        return f"account:{account.id}"

    if not ai_available():
        return [_unavailable_route(authorize)]
    rest = importlib.import_module(AI_MODULE)
    gateway = importlib.import_module("ember.bindings.ai.gateway")
    host = DeploymentHost(resources, "platform")
    routes: list[BaseRoute] = rest.ai_routes(lambda: gateway.shared_gateway(host), authorize)
    return routes


def _unavailable_route(authorize: Callable[[Request, str | None], object]) -> Route:
    async def unavailable(request: Request) -> Response:
        await authorize(request, request.path_params["account_id"])  # type: ignore[misc]
        return fail(
            501,
            UNAVAILABLE_CODE,
            "Workers AI is not available on this platform: this ember build has no model "
            "service (ember.bindings.ai is not installed)",
        )

    return Route(AI_PREFIX + "/{rest:path}", unavailable, methods=["GET", "POST"])
