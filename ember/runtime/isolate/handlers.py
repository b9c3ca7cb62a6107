"""Find the user's handlers in the main module and call them with the arguments they take.

Three styles, checked in this order:

1. Python Workers: ``class Default(WorkerEntrypoint)`` with ``async def fetch(self, request)``
   (or ``fetch(self)``) and ``async def scheduled(self, controller, env, ctx)``; one instance
   per event, with ``self.env`` and ``self.ctx``.
2. Module functions: ``async def fetch(request, env, ctx)`` / ``scheduled(controller, env, ctx)``.
3. Legacy: ``async def on_fetch(request, env)`` / ``on_scheduled(controller, env, ctx)``.

Handlers may take fewer parameters than offered (``fetch(request)``), as the platform allows.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import CoroutineType, ModuleType
from typing import Any

from ember.errors import HandlerError
from ember.runtime.isolate import entrypoints
from ember.runtime.isolate.scope import Context

Handler = Callable[[Any, Any, Context], Awaitable[Any]]
NO_HANDLER_HINT = (
    "expected `class Default(WorkerEntrypoint)` with `async def fetch(self, request)`, "
    "`async def fetch(request, env, ctx)`, or `async def on_fetch(request, env)`"
)


@dataclass(frozen=True, slots=True)
class Entrypoints:
    """The events a worker handles."""

    fetch: Handler | None
    scheduled: Handler | None

    @property
    def names(self) -> list[str]:
        """Handled event names, for the Ready frame and the dev banner."""
        return [n for n, h in (("fetch", self.fetch), ("scheduled", self.scheduled)) if h]


def discover(module: ModuleType, main: str) -> Entrypoints:
    """The module's handlers; HandlerError naming ``main`` if it has none."""
    default = getattr(module, "Default", None)
    if isinstance(default, type) and (
        issubclass(default, entrypoints.WorkerEntrypoint)
        or callable(getattr(default, "fetch", None))
    ):
        entry = Entrypoints(
            fetch=_method(default, "fetch", offered=1),
            scheduled=_method(default, "scheduled", offered=3),
        )
    else:
        entry = Entrypoints(
            fetch=_function(module, ("fetch", "on_fetch")),
            scheduled=_function(module, ("scheduled", "on_scheduled")),
        )
    if entry.fetch is None and entry.scheduled is None:
        raise HandlerError(f"{main} defines no handler: {NO_HANDLER_HINT}")
    return entry


def _method(cls: type, name: str, offered: int) -> Handler | None:
    function = getattr(cls, name, None)
    if not callable(function):
        return None
    count = _positional_count(function, offered + 1) - 1  # minus self

    async def call(first: Any, env: Any, ctx: Context) -> Any:
        instance = cls(ctx, env)
        bound = getattr(instance, name)
        result = bound(*(first, env, ctx)[: max(count, 0)])
        if type(result) is CoroutineType:  # (an async def handler: the usual case, checked first)
            return await result
        return await result if inspect.isawaitable(result) else result

    return call


def _function(module: ModuleType, names: tuple[str, ...]) -> Handler | None:
    for name in names:
        function = getattr(module, name, None)
        # `from workers import fetch` puts the subrequest function on the module: not a handler.
        if not callable(function) or getattr(function, "__module__", "").startswith("ember."):
            continue
        if isinstance(function, type):
            continue
        count = _positional_count(function, 3)

        async def call(
            first: Any, env: Any, ctx: Context, _f: Any = function, _n: int = count
        ) -> Any:
            result = _f(*(first, env, ctx)[:_n])
            if type(result) is CoroutineType:
                return await result
            return await result if inspect.isawaitable(result) else result

        return call
    return None


def _positional_count(function: Any, most: int) -> int:
    """How many of ``most`` positional arguments ``function`` accepts."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return most
    count = 0
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return most
        if parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            count += 1
    return min(count, most)
