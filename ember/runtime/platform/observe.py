"""What ``ember serve`` does with the supervisor's events: live tails, and its own log lines.

Each finished invocation of a deployment a tail watches arrives whole (``InvocationEvent``:
request, status, console lines, exceptions, or the cron of a scheduled event) and is published
to the tail hub as wrangler's ``trace-v1`` message. The supervisor is asked to report
invocations whole only while a tail is connected to the worker (``tracing``), so the request
path costs nothing extra otherwise. Tenants' console output never goes to the operator's
terminal; ``--log-requests`` prints one line per request (when, in UTC; worker, path without
its query, status, time), no bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from ember.runtime import events as E
from ember.runtime.deployments.tail_events import TailEvent, TailException, TailHub, TailLog
from ember.runtime.platform.metrics import WorkerTally
from ember.runtime.platform.stamp import utc_stamp
from ember.runtime.platform.translate import VersionSlot, slot_owner

# The runtime's outcome tags -> the outcomes wrangler's tail knows.
OUTCOMES = {
    "ok": "ok",
    "exception": "exception",
    "canceled": "canceled",
    "cpu_limit": "exceededCpu",
    "memory_limit": "exceededMemory",
}
# Credentials a worker receives are not copied into tail events (as on Cloudflare).
REDACTED_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


# C0 and C1 controls, DEL and the Unicode line separators: what could end a line of the
# operator's log or move its terminal's cursor.
_UNPRINTABLE = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))} | {
    0x09: "\\t",
    0x0A: "\\n",
    0x0D: "\\r",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def operator_printer(print_line: Callable[[str], None]) -> Callable[[str], None]:
    """``print_line`` for lines that may quote a tenant (an AI note quoting its input, a load
    error's message, a model id from a URL): control characters are printed escaped, so a
    tenant can neither forge a line of the operator's log nor drive the terminal."""

    def printer(line: str) -> None:
        print_line(line.translate(_UNPRINTABLE))

    return printer


class PlatformEvents:
    """The supervisor's ``EventSink`` on ``ember serve``."""

    def __init__(
        self,
        hub: TailHub,
        slot_of: Callable[[str], VersionSlot | None],
        print_line: Callable[[str], None],
        log_requests: bool = False,
        account_name: Callable[[str], str] | None = None,
    ) -> None:
        self.hub = hub
        self.slot_of = slot_of
        self.print_line = print_line
        self.log_requests = log_requests
        self.account_name = account_name
        self.workers = WorkerTally()  # ember serve --metrics-port

    def where(self, deployment_id: str) -> str:
        """``worker.account`` for the log, also for a slot no longer registered (a stopped or
        drained version: its isolate's last lines come after it left the table)."""
        slot = self.slot_of(deployment_id)
        if slot is not None:
            return f"{slot.script_name}.{slot.account_name}"
        owner = slot_owner(deployment_id)
        if owner is None or self.account_name is None:
            return deployment_id
        return f"{owner[1]}.{self.account_name(owner[0])}"

    def tracing(self, deployment_id: str) -> bool:
        """The supervisor's predicate: report this slot's invocations whole?"""
        slot = self.slot_of(deployment_id)
        return slot is not None and self.hub.has_subscribers(slot.script_id)

    def emit(self, event: E.Event) -> None:
        if isinstance(event, E.InvocationEvent):
            slot = self.slot_of(event.deployment_id)
            if slot is not None:
                self.hub.publish(slot.script_id, tail_event(slot, event))
        elif isinstance(event, E.RequestEvent):
            self.workers.record(event.status, event.outcome)
            if not self.log_requests:
                return
            where = self.where(event.deployment_id)
            note = "" if event.outcome in ("ok", "exception") else f" [{event.outcome}]"
            # The path, never the query: a query may carry a secret (a token, a signature).
            path = urlsplit(event.url).path or "/"
            self.print_line(
                f"{utc_stamp()} {event.method} {where} {path} {event.status} "
                f"({event.duration_ms:.1f}ms){note}"
            )
        elif isinstance(event, E.LifecycleEvent) and event.level != "info":
            self.print_line(f"[ember] {self.where(event.deployment_id)}: {event.message}")


def tail_event(slot: VersionSlot, event: E.InvocationEvent) -> TailEvent:
    """An invocation as wrangler's tail shows it."""
    logs = tuple(TailLog(level, (message,), int(ts)) for level, message, ts in event.logs)
    exceptions = tuple(
        TailException(*_name_and_message(message), int(ts), traceback or None)
        for message, traceback, ts in event.exceptions
    )
    common = dict(
        script_name=slot.script_name,
        outcome=OUTCOMES.get(event.outcome, "unknown"),
        event_timestamp_ms=int(event.started_ms),
        version_id=slot.version_id,
        logs=logs,
        exceptions=exceptions,
        wall_time_ms=int(event.wall_ms),
        cpu_time_ms=int(event.cpu_ms),
        truncated=event.truncated,
    )
    if event.kind == "scheduled":
        return TailEvent(cron=event.cron, scheduled_time_ms=int(event.scheduled_time_ms), **common)
    headers = {
        name: ("REDACTED" if name.lower() in REDACTED_HEADERS else value)
        for name, value in event.headers
    }
    return TailEvent(
        url=event.url, method=event.method, headers=headers, status=event.status, **common
    )


def _name_and_message(text: str) -> tuple[str, str]:
    """``"ValueError: kaboom"`` -> ("ValueError", "kaboom")."""
    name, sep, rest = text.partition(": ")
    if sep and name.replace(".", "").replace("_", "").isalnum():
        return name, rest
    return "Error", text
