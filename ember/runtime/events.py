"""What the supervisor reports as it runs: request lines, console output, exceptions, lifecycle.

``ember dev`` prints these; ``ember serve`` will also feed them to ``tail``. Secret values of a
deployment are redacted from console lines and tracebacks before an event is emitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

REDACTED = "[REDACTED]"
MIN_REDACTED_LENGTH = 4  # shorter secrets would blank out ordinary words


class RequestEvent(NamedTuple):
    """One finished fetch: method, URL, status, duration, outcome ("ok" or an error tag).

    Immutable like the other events, but a NamedTuple: one is built per request, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field) costs three times as much.
    """

    deployment_id: str
    method: str
    url: str
    status: int
    duration_ms: float
    cpu_ms: float
    outcome: str


@dataclass(frozen=True, slots=True)
class ScheduledEvent:
    """One finished scheduled event."""

    deployment_id: str
    cron: str
    outcome: str
    duration_ms: float


@dataclass(frozen=True, slots=True)
class ConsoleEvent:
    """A line the handler printed."""

    deployment_id: str
    level: str
    message: str


@dataclass(frozen=True, slots=True)
class ExceptionEvent:
    """A handler (or module load) raised; ``traceback`` shows the user's frames."""

    deployment_id: str
    message: str
    traceback: str


@dataclass(frozen=True, slots=True)
class LifecycleEvent:
    """An isolate started, reloaded, was replaced or killed."""

    deployment_id: str
    level: str  # info, warn, error
    message: str


@dataclass(frozen=True, slots=True)
class InvocationEvent:
    """One finished invocation with everything it printed and raised (what ``tail`` shows).

    Emitted only for deployments the supervisor's ``tracing`` predicate selects, once the
    invocation is over (its ``waitUntil`` work included). ``logs`` are (level, message, epoch
    ms); ``exceptions`` are (message, traceback, epoch ms); messages are already redacted.
    """

    deployment_id: str
    kind: str  # "fetch" or "scheduled"
    outcome: str  # "ok", "exception", "canceled" or a platform error tag
    started_ms: float  # epoch milliseconds
    wall_ms: float
    cpu_ms: float
    method: str = ""
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    status: int = 0
    cron: str = ""
    scheduled_time_ms: float = 0.0
    logs: tuple[tuple[str, str, float], ...] = ()
    exceptions: tuple[tuple[str, str, float], ...] = ()
    truncated: bool = False  # lines past the trace's byte bound were dropped


Event = (
    RequestEvent | ScheduledEvent | ConsoleEvent | ExceptionEvent | LifecycleEvent | InvocationEvent
)


class EventSink(Protocol):
    """Where events go (the dev terminal, a test's list, later a tail stream)."""

    def emit(self, event: Event) -> None:
        """Receive one event; must not block."""
        ...


class ListSink:
    """Keeps events in a list (tests, benchmarks)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        """Append."""
        self.events.append(event)


class Redactor:
    """Replaces a deployment's secret values in text."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        values = {v for v in secrets.values() if len(v) >= MIN_REDACTED_LENGTH}
        self._values = sorted(values, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text
