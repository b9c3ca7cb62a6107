"""What a handler subclasses or calls around its requests: ``WorkerEntrypoint`` (and the classes
Python Workers export beside it), the ``scheduled`` event's controller, and ``wait_until``."""

from __future__ import annotations

from typing import Any

from ember.runtime.isolate.scope import Context, current_scope


class WorkerEntrypoint:
    """Base class of a Python Workers entrypoint: ``class Default(WorkerEntrypoint)``."""

    def __init__(self, ctx: Context, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class DurableObject:
    """Importable for compatibility; Durable Objects are not emulated by ember yet."""

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class WorkflowEntrypoint(WorkerEntrypoint):
    """Importable for compatibility; Workflows are not emulated by ember yet."""


class ScheduledController:
    """The ``controller`` of a ``scheduled`` event."""

    type = "scheduled"

    def __init__(self, cron: str, scheduled_time: float) -> None:
        self.cron = cron
        # Whole milliseconds since the epoch, as on the platform (Pyodide turns that integral
        # JS number into an int): 1000, not 1000.0.
        self.scheduled_time = int(scheduled_time)
        self.scheduledTime = self.scheduled_time  # noqa: N815 - the JavaScript name
        self.retry = True

    def no_retry(self) -> None:
        """Do not retry this event if it fails (accepted; ember does not retry crons)."""
        self.retry = False

    noRetry = no_retry  # noqa: N815


def handler(function: Any) -> Any:
    """The legacy ``@handler`` decorator of ``on_fetch`` / ``on_scheduled``: the function is
    found by its name either way, so it is returned unchanged."""
    return function


def wait_until(awaitable: Any) -> None:
    """Module-level ``waitUntil`` for the running request."""
    current_scope().ctx.wait_until(awaitable)


waitUntil = wait_until
