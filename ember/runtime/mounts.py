"""HTTP routes that binding types serve on the runtime's own port, ahead of the worker.

A binding type may name an ``HttpMountFactory`` (``BindingType.http``): ``ember dev`` builds the
mounts of the types its project uses once, at start, and ``with_binding_mounts`` sends the
requests they claim (by path) to them; every other request goes to the router as before. The
AI binding serves Workers AI's REST API and the OpenAI-compatible API this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember.bindings.base import BindingSpec, HttpMount, ServiceHost, import_target
from ember.bindings.registry import BindingRegistry


def binding_mounts(
    registry: BindingRegistry, host: ServiceHost, bindings: Sequence[BindingSpec]
) -> list[HttpMount]:
    """The mounts of the binding types ``bindings`` use."""
    mounts = []
    for binding_type in registry.types:
        specs = tuple(b for b in bindings if b.kind == binding_type.kind)
        if binding_type.http is not None and specs:
            mounts.append(import_target(binding_type.http)(host, specs))
    return mounts


def with_binding_mounts(app: Any, mounts: Sequence[HttpMount]) -> Any:
    """``app`` with ``mounts`` answering the HTTP paths they claim (lifespan stays ``app``'s)."""
    if not mounts:
        return app

    async def dispatch(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for mount in mounts:
                if mount.matches(scope["path"]):
                    await mount.app(scope, receive, send)
                    return
        await app(scope, receive, send)

    return dispatch
