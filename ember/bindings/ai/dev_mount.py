"""``ember dev``'s AI HTTP APIs: ``rest.ai_app`` on the dev server's port (``BindingType.http``).

``ember dev`` makes a new mount on each config reload (``runtime/mounts.py``); its first request
has the supervisor's shared gateway adopt that ``ai`` section, as ``env.AI``'s first call does,
so a changed section reaches the HTTP APIs before any worker calls a model.

Every request is accounted to the project's own tenant, whatever account id its path names: on
the platform a worker's ``env.AI`` and the REST API of its account are one account, so a batch
queued on one side is polled on the other (and a gateway log written by one is read by the other).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ember.bindings.ai.gateway import AIGateway, GatewayConfig, shared_gateway
from ember.bindings.ai.rest import ai_app, is_ai_path
from ember.bindings.ai.spec import config_of
from ember.bindings.ai.tenant import Tenant
from ember.bindings.base import BindingSpec, HttpMount, ServiceHost
from ember.errors import CheckpointError, ConfigError


def dev_mount(host: ServiceHost, specs: tuple[BindingSpec, ...]) -> HttpMount:
    """The AI APIs on the dev server's port, over the project's gateway."""
    return HttpMount(is_ai_path, _AdoptingApp(host, config_of(specs[0])))


class _AdoptingApp:
    """``ai_app`` over the shared gateway, configured with ``config`` on its first request; a
    checkpoint it cannot read fails each request as ``ready()`` reports it, until fixed."""

    def __init__(self, host: ServiceHost, config: GatewayConfig) -> None:
        self._host = host
        self._config = config
        self._adopted = False
        self._error: Exception | None = None
        self._app = ai_app(self._gateway, self._project_tenant)

    async def _project_tenant(
        self, request: Request, account: str | None, *, inference: bool
    ) -> Tenant:
        return Tenant.alone(self._host.deployment_id)  # as env.AI's service (service.py)

    def _gateway(self) -> AIGateway:
        if self._error is not None:
            raise self._error
        return shared_gateway(self._host, self._config)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not self._adopted:
            try:
                await shared_gateway(self._host, self._config).configure(self._config)
            except (CheckpointError, ConfigError) as exc:
                self._error = exc
            else:
                self._adopted, self._error = True, None
        await self._app(scope, receive, send)
