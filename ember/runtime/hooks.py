"""The supervisor's side of an isolate's reports: one ``SupervisorHooks`` per isolate process.

An ``IsolateProcess`` knows nothing of deployments' secrets, event sinks or dev mode; it calls
these hooks, which redact what the isolate said with its deployment's secrets, emit the
supervisor's events (console, exception, request, whole invocations for tails), build the error
page for a failed request (dev: the traceback page; platform: Workers' error), and hand recycling
and death back to the supervisor.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ember.runtime import events as E
from ember.runtime import limits as L
from ember.runtime.console_gate import dropped_notice
from ember.runtime.errorpage import dev_error_response, platform_error_response
from ember.runtime.http import HttpResponse
from ember.runtime.inflight import InFlight

if TYPE_CHECKING:
    from ember.runtime.process import IsolateProcess
    from ember.runtime.supervisor import Supervisor

# Text (console lines, exception messages and tracebacks) one traced invocation keeps for its
# tail event. Cloudflare truncates a tail event's logs too; 256 KiB holds a few of ember's
# longest lines (fields.MAX_TEXT, 64 KiB) and a traceback, and a quiet isolate's whole second
# of console output (console_gate.CHARS_PER_SECOND, 256,000) with room for the notice of what
# was dropped past it.
TRACE_BYTES = 256 * 1024
# Notes one request keeps for its dev error page (a loop of failing calls must not grow it).
MAX_PAGE_NOTES = 20


class SupervisorHooks:
    """What an IsolateProcess reports to its Supervisor: logs, exceptions, request events,
    error pages, and its own recycling or death."""

    __slots__ = ("_supervisor",)

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor

    def _redact(self, process: IsolateProcess, text: str) -> str:
        slot = self._supervisor._slot_of(process)
        return slot.redact(text) if slot is not None else text

    def tracing(self, process: IsolateProcess) -> bool:
        """Whether a new invocation of this isolate is to be reported whole (InvocationEvent)."""
        predicate = self._supervisor.tracing
        return predicate is not None and predicate(process.deployment.id)

    def call_refusal(self, process: IsolateProcess) -> str | None:
        """Why this isolate's binding calls are refused now (``Supervisor.call_refusal``)."""
        predicate = self._supervisor.call_refusal
        return predicate(process.deployment.id) if predicate is not None else None

    def console(
        self, process: IsolateProcess, level: str, message: str, request: InFlight | None = None
    ) -> None:
        message = self._redact(process, message)
        self._supervisor.events.emit(E.ConsoleEvent(process.deployment.id, level, message))
        if request is not None and request.trace is not None and _keep(request, len(message)):
            request.trace.append((level, message, time.time() * 1000))

    def console_dropped(
        self, process: IsolateProcess, lines: int, chars: int, request: InFlight | None
    ) -> None:
        """Console lines dropped past the isolate's budget (``console_gate.py``): one warn line
        of the invocation's log saying how many, and its tail event marked ``truncated``. A
        console line, not the operator's: a tenant's flood must not become one in his log."""
        budget = process.limits.console_chars_per_s or 0
        message = dropped_notice(lines, chars, budget)
        self._supervisor.events.emit(E.ConsoleEvent(process.deployment.id, "warn", message))
        if request is not None and request.trace is not None:
            request.trace_truncated = True
            if _keep(request, len(message)):
                request.trace.append(("warn", message, time.time() * 1000))

    def note(
        self, process: IsolateProcess, level: str, message: str, request: InFlight | None
    ) -> None:
        """A binding service's note about one of the request's calls (the AI gateway's, e.g.
        "content is null: the model spent all of max_tokens thinking"): a line of the
        invocation's log, as the worker's own console lines are (what ``tail`` shows), and a
        line for the operator naming the worker and account (a warn LifecycleEvent, which
        ``ember serve`` prints so). Not a ConsoleEvent: the worker did not print it. In
        ``ember dev`` the request keeps it for its error page, should it fail."""
        message = self._redact(process, message)
        self._supervisor.events.emit(E.LifecycleEvent(process.deployment.id, level, message))
        if self._supervisor.dev and request is not None:
            notes = request.notes if request.notes is not None else []
            if len(notes) < MAX_PAGE_NOTES:
                notes.append(message)
            request.notes = notes
        if request is not None and request.trace is not None and _keep(request, len(message)):
            request.trace.append((level, message, time.time() * 1000))

    def exception(
        self,
        process: IsolateProcess,
        message: str,
        traceback: str,
        request: InFlight | None = None,
    ) -> None:
        message, traceback = self._redact(process, message), self._redact(process, traceback)
        self._supervisor.events.emit(E.ExceptionEvent(process.deployment.id, message, traceback))
        if (
            request is not None
            and request.trace is not None
            and _keep(request, len(message) + len(traceback))
        ):
            request.trace_exceptions.append((message, traceback, time.time() * 1000))

    def error_response(
        self, request: InFlight, kind: str, message: str, traceback: str
    ) -> HttpResponse:
        supervisor = self._supervisor
        notes = request.notes or ()  # only ember dev keeps them (note)
        if kind == "no_handler":
            error = L.PlatformError(500, 1101, message, "no_handler")
            if supervisor.dev:
                return dev_error_response(
                    "Worker has no fetch handler", message, "", request.accept, notes=notes
                )
            return platform_error_response(error)
        if kind == "response_headers":
            too_large = L.RESPONSE_HEADERS_TOO_LARGE
            if supervisor.dev:
                title = "Worker response headers too large"
                return dev_error_response(
                    title, message, "", request.accept, too_large.status, notes
                )
            return platform_error_response(too_large)
        if supervisor.dev:
            title = (
                "Worker returned an invalid response"
                if kind == "invalid_response"
                else "Worker threw exception"
            )
            return dev_error_response(
                title,
                self._redact(request.process, message),
                self._redact(request.process, traceback),
                request.accept,
                notes=notes,
            )
        return platform_error_response(L.EXCEPTION)

    def request_logged(self, process: IsolateProcess, request: InFlight) -> None:
        if request.kind != "fetch":
            return
        done = request.finished.done()
        cpu = request.cpu_used if done else request.own_cpu(process.clock.shared())
        duration = (time.monotonic() - request.started) * 1000
        self._supervisor.events.emit(
            E.RequestEvent(
                process.deployment.id,
                request.method,
                request.url,
                request.status,
                duration,
                cpu * 1000,
                request.outcome,
            )
        )

    def request_done(self, process: IsolateProcess, request: InFlight) -> None:
        """Report a traced invocation whole, now that its waitUntil work is over too."""
        if request.trace is None:
            return
        wall_ms = (time.monotonic() - request.started) * 1000
        scheduled = request.kind == "scheduled"
        self._supervisor.events.emit(
            E.InvocationEvent(
                deployment_id=process.deployment.id,
                kind=request.kind,
                outcome=request.outcome,
                started_ms=time.time() * 1000 - wall_ms,
                wall_ms=wall_ms,
                cpu_ms=request.cpu_used * 1000,
                method="" if scheduled else request.method,
                url="" if scheduled else self._redact(process, request.url),
                headers=() if scheduled else tuple(request.headers),
                status=request.status,
                cron=request.url if scheduled else "",
                scheduled_time_ms=request.scheduled_time,
                logs=tuple(request.trace),
                exceptions=tuple(request.trace_exceptions),
                truncated=request.trace_truncated,
            )
        )

    def recycle(self, process: IsolateProcess, reason: str) -> None:
        self._supervisor._recycle(process, reason)

    def dead(self, process: IsolateProcess, error: L.PlatformError | None, reason: str) -> None:
        self._supervisor._process_dead(process, error, reason)


def _keep(request: InFlight, size: int) -> bool:
    """Whether a traced line still fits the invocation's ``TRACE_BYTES``.

    A traced invocation is held whole in the supervisor (shared by every tenant) until it ends,
    then queued for each tail; without a bound, one worker printing in a loop grew it without
    end. Past the bound, lines are dropped and the event says ``truncated``, as Cloudflare's.
    """
    if request.trace_bytes + size > TRACE_BYTES:
        request.trace_truncated = True
        return False
    request.trace_bytes += size
    return True
