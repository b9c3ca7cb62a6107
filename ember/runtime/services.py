"""Binding services as the supervisor holds them: shared resources, one table per deployment.

``SharedResources`` is one per supervisor: the state directory, the clock, and objects that
every deployment's services share (the KV store, an HTTP client, later a model pool), created
on first use and closed with the supervisor. ``DeploymentServices`` is one per running
deployment version: its binding services, created lazily on their first call (so nothing
model-related is ever loaded by just configuring a binding), plus the subrequest service.
A call can only reach the services in its own isolate's table: the connection is the capability.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ember.bindings.base import (
    BindingService,
    BindingSpec,
    CallContext,
    ServiceUnavailable,
    StreamReply,
    import_target,
)
from ember.bindings.registry import BindingRegistry
from ember.runtime.deployment import Deployment

T = TypeVar("T")
log = logging.getLogger(__name__)
SUBREQUEST_BINDING = "__fetch__"


class SharedResources:
    """Per-supervisor objects shared by every deployment's services."""

    def __init__(self, state_dir: Path, clock: Callable[[], float] = time.time) -> None:
        self.state_dir = state_dir
        self.clock = clock
        self._objects: dict[Hashable, object] = {}

    def shared(self, key: Hashable, factory: Callable[[], T]) -> T:
        """The object under ``key`` (a name, or a tuple naming its settings too), made by
        ``factory`` on first use."""
        if key not in self._objects:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._objects[key] = factory()
        return self._objects[key]  # type: ignore[return-value]

    async def aclose(self) -> None:
        """Close every shared object that can be closed (newest first)."""
        for key in reversed(list(self._objects)):
            value = self._objects.pop(key)
            closer = getattr(value, "aclose", None) or getattr(value, "close", None)
            if closer is None:
                continue
            try:
                result = closer()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # one failing close must not leak the others
                log.exception("closing shared resource %s failed", key)


@dataclass(frozen=True, slots=True)
class DeploymentHost:
    """The ``ServiceHost`` a deployment's services see."""

    resources: SharedResources
    deployment_id: str

    @property
    def state_dir(self) -> Path:
        """The supervisor's state directory."""
        return self.resources.state_dir

    def clock(self) -> float:
        """Seconds since the epoch."""
        return self.resources.clock()

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """See ``SharedResources.shared``."""
        return self.resources.shared(key, factory)


@dataclass
class DeploymentServices:
    """The binding services of one deployment version (and its subrequest service)."""

    deployment: Deployment
    registry: BindingRegistry
    resources: SharedResources
    subrequests: BindingService
    _services: dict[str, BindingService] = field(default_factory=dict)
    _specs: dict[str, BindingSpec] = field(init=False)

    def __post_init__(self) -> None:
        self._specs = {spec.name: spec for spec in self.deployment.bindings}

    def get(self, name: str) -> BindingService | None:
        """The service for binding ``name`` (created on first use); None if it has none."""
        if name == SUBREQUEST_BINDING:
            return self.subrequests
        service = self._services.get(name)
        if service is not None:
            return service
        spec = self._specs.get(name)
        if spec is None:
            return None
        binding_type = self.registry.by_kind(spec.kind)
        if binding_type.service is None:
            return None
        try:
            factory: Any = import_target(binding_type.service)
            service = factory(spec, DeploymentHost(self.resources, self.deployment.id))
        except Exception as exc:
            # Built inside the isolate's protocol callback: raising here would end the isolate
            # and every request in flight on it. Only the calls that need this binding fail,
            # and nothing is cached, so the next call tries again (the user may fix the cause).
            log.error("binding %s of %s cannot be built: %s", name, self.deployment.id, exc)
            return _Unbuilt(ServiceUnavailable(spec.kind, name, exc))
        self._services[name] = service
        return service

    def has_binding(self, name: str) -> bool:
        """True if ``name`` is one of this deployment's bindings."""
        return name in self._specs

    async def close(self) -> None:
        """Close the services created so far."""
        services, self._services = self._services, {}
        for service in services.values():
            try:
                await service.close()
            except Exception:
                log.exception("closing a binding service of %s failed", self.deployment.id)


class _Unbuilt(BindingService):
    """Stands in for a service whose construction failed: every call raises why."""

    def __init__(self, error: ServiceUnavailable) -> None:
        self._error = error

    async def call(self, method: str, args: list[Any], ctx: CallContext) -> object | StreamReply:
        raise self._error
