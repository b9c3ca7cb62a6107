"""Workers AI on ``ember serve``: the REST routes, one gateway, temporary accounts' rate.

- ``POST /client/v4/accounts/{a}/ai/run/{model}`` (and the OpenAI-compatible routes) from
  ``ember.bindings.ai.rest``, behind the platform's authentication: the bearer token must belong
  to the account in the path (403 otherwise) and the request acts for the account: it sees the
  batches, gateway logs and stored responses of the account's workers' ``env.AI``, and they its.
- One gateway (so one model pool) for those routes and every worker's ``env.AI``, configured by
  the operator (the ``ai:`` section of ``ember serve --config``), never by a deployment.
- Each account may run on its ``ai_running_share`` of a model's slots (platform.accounts,
  platform.temporary) and hold at most ``account_share``
  (``DEFAULT_ACCOUNT_SHARE`` unless the operator sets it) of its queue, across its workers and
  REST calls, and the pool's queue serves accounts in turn (``ember.models.pool.fair``): one
  account's flood cannot fill the queue every tenant shares.
- An account's neurons per UTC day (``ai_neurons_per_day``; temporary accounts: Workers AI's free
  10,000) travel on its ``Tenant``: the gateway checks them before admission and counts each
  answer's (``ember.bindings.ai.neurons``), across its REST calls, workers and batches.
- A temporary account's AI requests per minute are counted per account, across the REST route
  and all its workers' ``env.AI`` (``AccountLimitedAI`` wraps the binding's service), and refused
  with Workers AI's quota error (3036, HTTP 429) past the limit. Only inference counts: the
  model list (``ember deploy`` reads it) and other lookups do not. Each refusal is counted in
  the gateway's metrics (``ember_ai_requests_total``) with its status and code, as the
  gateway counts its own failures.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ember.bindings.base import (
    BindingService,
    BindingSpec,
    ServiceError,
    ServiceHost,
    import_target,
)
from ember.bindings.registry import BindingRegistry
from ember.runtime.api.context import bearer
from ember.runtime.api.envelope import fail
from ember.runtime.deployments.errors import Forbidden, RateLimited
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.platform.ai_log import ACCOUNT_SCOPE_KEY
from ember.runtime.platform.quota import AccountRateLimiter
from ember.runtime.services import DeploymentHost, SharedResources

AI_MODULE = "ember.bindings.ai.rest"
TENANT_MODULE = "ember.bindings.ai.tenant"
AI_PREFIX = "/client/v4/accounts/{account_id}/ai"
UNAVAILABLE_CODE = 7000  # ember's: no such service on this platform
RATE_KEY = "platform.ai_rate"
WRAPPED_SERVICE = "ember.runtime.platform.ai:AccountLimitedAI"
# One account's part of each model's queue, on top of every running slot: with the defaults
# (128 running, 256 queued) an account alone fills the 128 slots and queues 128 more, while a
# flood of it leaves the other half of the queue to everybody else.
DEFAULT_ACCOUNT_SHARE = 0.5
# Options translate.py adds to an account's AI spec (the wrapped service removes the rate's).
ACCOUNT_OPTION, RATE_OPTION, REMEDY_OPTION = "account", "ai_requests_per_minute", "ai_rate_remedy"
# The platform_meta secret each account's AI cache salt is derived from (bindings/ai/cache_salt.py).
CACHE_SALT_KEY = "ai_cache_salt"
# The largest body a refused request's metrics label (its model) is read from.
MODEL_BODY_BYTES = 64 * 1024


def ai_available() -> bool:
    try:
        return importlib.util.find_spec(AI_MODULE) is not None
    except ModuleNotFoundError:
        return False


def account_limiter(resources: SharedResources) -> AccountRateLimiter:
    """The platform's one per-account AI rate limiter (REST and bindings share it)."""
    return resources.shared(RATE_KEY, lambda: AccountRateLimiter("AI_requests"))


def configure_gateway(
    resources: SharedResources, config: Any | None, cache_salt_key: bytes | None = None
) -> None:
    """Create the shared gateway now from the operator's ``ai`` settings (``GatewayConfig``);
    ``cache_salt_key``: the platform's key of each account's cache salt
    (``ember.bindings.ai.cache_salt``), so accounts never share prefix-cache pages."""
    if not ai_available():
        return
    gateway = importlib.import_module("ember.bindings.ai.gateway")
    settings = config or gateway.GatewayConfig()
    pool = settings.pool
    # The operator pays for every replica: a catalog id nobody configured is no licence for a
    # tenant to start one (unless the operator's pool section says serve_unconfigured: true),
    # and how replicas run (paths, config file, args) stays in the operator's log.
    unconfigured = pool.settings.serve_unconfigured is True
    # Tenants share every model: one account may hold at most this part of a model's slots and
    # queue unless the operator says otherwise (ember.models.pool.fair).
    share = pool.settings.account_share or DEFAULT_ACCOUNT_SHARE
    pool = pool.with_settings(
        serve_unconfigured=unconfigured, operator_detail=False, account_share=share
    )
    # project_config False: deployments may not change it.
    owned = dataclasses.replace(
        settings, pool=pool, project_config=False, cache_salt_key=cache_salt_key
    )
    resources.shared(gateway.GATEWAY_KEY, lambda: gateway.AIGateway(owned))


def limit_ai_bindings(registry: BindingRegistry) -> None:
    """Route every ``env.AI`` service through ``AccountLimitedAI``."""
    try:
        ai_type = registry.by_kind("ai")
    except KeyError:
        return
    if ai_type.service is not None and ai_type.service != WRAPPED_SERVICE:
        registry.replace(dataclasses.replace(ai_type, service=WRAPPED_SERVICE))


class AccountLimitedAI(BindingService):
    """``env.AI`` whose ``run`` calls count against the account's requests per minute."""

    def __init__(self, spec: BindingSpec, host: ServiceHost) -> None:
        self.account = str(spec.options.get(ACCOUNT_OPTION) or "")
        rate = spec.options.get(RATE_OPTION)
        self.per_minute = rate if isinstance(rate, int) and rate > 0 else None
        remedy = spec.options.get(REMEDY_OPTION)
        self.remedy = remedy if isinstance(remedy, str) else ""
        # The account stays: the AI service scopes the deployment's data by it (service.py).
        rate_keys = (RATE_OPTION, REMEDY_OPTION)
        options = {k: v for k, v in spec.options.items() if k not in rate_keys}
        inner_spec = dataclasses.replace(spec, options=options)
        self.inner: BindingService = import_target(_ai_service())(inner_spec, host)
        self.limiter: AccountRateLimiter = host.shared(
            RATE_KEY, lambda: AccountRateLimiter("AI_requests")
        )
        self.host = host

    async def call(self, method: str, args: list[Any], ctx: Any) -> Any:
        if method == "run" and self.per_minute is not None:
            try:
                self.limiter.acquire(self.account, self.per_minute, self.remedy)
            except RateLimited as exc:
                model = str(args[0]) if args else ""
                refused, failure = _quota_error(exc, model)
                tenant = self.inner.tenant  # type: ignore[attr-defined]
                _gateway_of(self.host).count_refusal(
                    model, failure.status, failure.code.code, tenant
                )
                raise refused from None
        return await self.inner.call(method, args, ctx)

    async def close(self) -> None:
        await self.inner.close()


def _ai_service() -> str:
    spec = importlib.import_module("ember.bindings.ai.spec")
    return str(spec.SERVICE)


def _gateway_of(host: Any) -> Any:
    """The platform's one AI gateway (``configure_gateway`` made it at startup)."""
    return importlib.import_module("ember.bindings.ai.gateway").shared_gateway(host)


def _quota_error(exc: RateLimited, model: str) -> tuple[ServiceError, Any]:
    """Workers AI's own quota failure (3036), as the AI client turns it into an error, and
    the ``Failure`` it carries (its status and code are what the metrics count)."""
    failures = importlib.import_module("ember.bindings.ai.failures")
    pool_errors = importlib.import_module("ember.models.pool.errors")
    failure = failures.failure_of(
        pool_errors.quota_exceeded(
            "ai_requests_per_minute", exc.observed, exc.maximum, str(exc), 60.0
        ),
        model,
    )
    return ServiceError(failure.message, kind="ai", data=failure.to_data()), failure


async def _requested_model(request: Request) -> str:
    """The model a refused AI request asked for, for its metrics label: the path's (``ai/run``)
    or a small body's ``model`` (the OpenAI-compatible routes). A large body stays unread: a
    refused client must not make the platform read megabytes to label its refusal."""
    model = request.path_params.get("model")
    if isinstance(model, str):
        return model
    declared = request.headers.get("content-length", "")
    if not declared.isdigit() or int(declared) > MODEL_BODY_BYTES:
        return ""
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError, RecursionError):
        return ""
    found = body.get("model") if isinstance(body, dict) else None
    return found if isinstance(found, str) else ""


def ai_routes_for(plane: ControlPlane, resources: SharedResources) -> list[BaseRoute]:
    """The AI routes for the platform app (placed before the control API's mount)."""
    limiter = account_limiter(resources)
    host = DeploymentHost(resources, "platform")

    async def authorize(request: Request, account_id: str | None, *, inference: bool) -> Any:
        account, _ = plane.accounts.authenticate(bearer(request))
        if account_id is not None and account_id != account.id:
            raise Forbidden()
        request.scope[ACCOUNT_SCOPE_KEY] = account.id  # whose lines its refusal's line is
        limits = plane.config.limits_for(account.temporary)
        per_minute = limits.ai_requests_per_minute
        if inference and per_minute is not None:  # a listing is not an AI request
            try:
                limiter.acquire(account.id, per_minute, limits.remedy("ai_requests_per_minute"))
            except RateLimited as exc:
                if ai_available():
                    model = await _requested_model(request)
                    tenant = importlib.import_module(TENANT_MODULE).Tenant.of_account(account.id)
                    _gateway_of(host).count_refusal(model, exc.http_status, exc.cf_code, tenant)
                raise
        if not ai_available():
            return None  # the unavailable route only authenticates
        # The account's data scope, the one its workers' env.AI has too (bindings/ai/tenant.py),
        # and its part of each model's running slots (platform.accounts / platform.temporary).
        return importlib.import_module(TENANT_MODULE).Tenant.of_account(
            account.id,
            running_share=limits.ai_running_share,
            daily_neurons=limits.ai_neurons_per_day,
        )

    if not ai_available():
        return [_unavailable_route(authorize)]
    rest = importlib.import_module(AI_MODULE)
    gateway = importlib.import_module("ember.bindings.ai.gateway")
    routes: list[BaseRoute] = rest.ai_routes(lambda: gateway.shared_gateway(host), authorize)
    return routes


def _unavailable_route(authorize: Callable[..., object]) -> Route:
    async def unavailable(request: Request) -> Response:
        await authorize(request, request.path_params["account_id"], inference=False)  # type: ignore[misc]
        return fail(
            501,
            UNAVAILABLE_CODE,
            "Workers AI is not available on this platform: this ember build has no model "
            "service (ember.bindings.ai is not installed)",
        )

    return Route(AI_PREFIX + "/{rest:path}", unavailable, methods=["GET", "POST"])
