"""HTTP routes that binding types serve on the runtime's own port, ahead of the worker.

A binding type may name an ``HttpMountFactory`` (``BindingType.http``): ``ember dev`` builds the
mounts of the types its project uses at start and again on every config reload (a ``MountTable``
holds the current ones, so adding ``ai:`` brings the AI APIs and removing it takes them away, as
``wrangler dev`` applies the whole config), and ``with_binding_mounts`` sends the requests they
claim (by path) to them; every other request goes to the router as before. The AI binding serves
Workers AI's REST API and the OpenAI-compatible API this way.
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


class MountTable:
    """The mounts in force now; ``replace`` swaps them in one step (a reload)."""

    def __init__(self, mounts: Sequence[HttpMount] = ()) -> None:
        self.mounts: tuple[HttpMount, ...] = tuple(mounts)

    def replace(self, mounts: Sequence[HttpMount]) -> None:
        """Serve ``mounts`` from the next request on (requests already in a mount finish there)."""
        self.mounts = tuple(mounts)

    def matches(self, path: str) -> bool:
        """True when a current mount claims ``path`` (the fast HTTP path asks this)."""
        return any(mount.matches(path) for mount in self.mounts)


def with_binding_mounts(app: Any, table: MountTable) -> Any:
    """``app`` with ``table``'s current mounts answering the HTTP paths they claim (lifespan
    stays ``app``'s). The table is read on every request, so a reload needs no new app."""

    async def dispatch(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for mount in table.mounts:
                if mount.matches(scope["path"]):
                    await mount.app(scope, receive, send)
                    return
        await app(scope, receive, send)

    return dispatch
