"""Run fetch and scheduled events, each in its own task, and report how each one went.

Per event: call the handler, check it returned a ``Response``, send the head (with the body
inline when small, else as a credit-controlled stream), wait for ``waitUntil`` work, then send
Done. A body that is a binding's reply stream, unread, is handed back (``PipeResponse``): the
supervisor sends it to the client itself, and says when it is over. Failures become
RequestError frames with the user's traceback; a CPU interrupt or a MemoryError is reported as
such so the supervisor answers with the platform's limit error. An event whose code caught the
CPU interrupt and went on (``except BaseException``) ends with the limit error all the same: its
response is not sent, its stream is cut at the next chunk, and the report goes out once (the
supervisor also holds the request to the limit on its own: ``dispatch.py``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from ember.bindings.env import Env
from ember.bindings.streams import ReadableStream
from ember.runtime.fields import MAX_HEADER_BYTES, MAX_HEADERS
from ember.runtime.isolate import api, encoding, entrypoints
from ember.runtime.isolate.channel import IsolateChannel
from ember.runtime.isolate.console import ConsoleOut, StrayNotice
from ember.runtime.isolate.cpumeter import CpuMeter, Metered
from ember.runtime.isolate.handlers import Entrypoints
from ember.runtime.isolate.headers import Headers
from ember.runtime.isolate.scope import (
    CPU_EXCEEDED_MESSAGE,
    CURRENT,
    CpuLimitInterrupt,
    RequestScope,
)
from ember.runtime.isolate.tracebacks import format_user_traceback, user_message
from ember.runtime.mux import InStream, Mux, StreamAborted
from ember.runtime.protocol import (
    Cancel,
    Done,
    Message,
    PipeResponse,
    Request,
    RequestError,
    Response,
    Scheduled,
)

INLINE_RESPONSE_BYTES = 64 * 1024


def _headers_over_limit(headers: list[tuple[str, str]]) -> str | None:
    """What is wrong with a response's headers, by the protocol's limits; None when fine."""
    size = sum(len(name) + len(value) for name, value in headers)
    if len(headers) <= MAX_HEADERS and size <= MAX_HEADER_BYTES:
        return None
    return (
        f"Response headers over the limit: {len(headers)} headers of {size} bytes; a response "
        f"may have at most {MAX_HEADERS} headers of {MAX_HEADER_BYTES // 1024} KiB in all"
    )


NO_FETCH = "Handler does not export a fetch() function."
NO_SCHEDULED = "Handler does not export a scheduled() function."


class _Event:
    """One event in flight: its scope and its task."""

    __slots__ = ("scope", "task", "done_sent", "running", "cancelled")

    def __init__(self, scope: RequestScope) -> None:
        self.scope = scope
        self.task: asyncio.Task[None] | None = None
        self.done_sent = False  # the Response frame said done=True
        self.running = False  # the task took its first step (its finally, Done, will run)
        self.cancelled = False  # a Cancel came before that


class EventRunner:
    """Events of one isolate, keyed by request id."""

    def __init__(
        self,
        entry: Entrypoints,
        env: Env,
        send: Callable[[Message], None],
        mux: Mux,
        channel: IsolateChannel,
        meter: CpuMeter,
        console: ConsoleOut | None = None,
    ) -> None:
        self.entry = entry
        self.meter = meter
        self.env = env
        self.send = send
        self.mux = mux
        self.channel = channel
        # Its lines dropped past the console budget are reported before a request ends.
        self.console = console
        self.events: dict[int, _Event] = {}
        self.strays = StrayNotice(send)  # a warning when a request's end cancels its strays
        meter.live = self.events  # the events a CpuReport covers
        self._loop: asyncio.AbstractEventLoop | None = None  # found once: each lookup is a getpid

    def on_event(self, message: Request | Scheduled | Cancel) -> None:
        """Start a task for a new event, or cancel one."""
        if isinstance(message, Cancel):
            event = self.events.get(message.rid)
            if event is None:
                return
            if event.task is not None and not event.task.done():
                if event.running:
                    event.task.cancel()
                else:
                    # Read with its Request (the client left at once): a task cancelled before
                    # its first step never runs its finally, so it would never send Done and
                    # the supervisor would kill this isolate for ignoring the cancellation.
                    event.cancelled = True
            if message.background:
                for task in event.scope.background:
                    task.cancel()
            return
        event = _Event(RequestScope(message.rid, self.channel))
        self.events[message.rid] = event
        self.meter.enter()
        if isinstance(message, Request):
            # Register the body stream now: its Data frames may be in the same read as Request.
            body: Any = self.mux.expect_in(message.body_sid) if message.body_sid else message.body
            work = self._fetch(event, message, body)
        else:
            work = self._scheduled(event, message)
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        run = Metered(self._run(event, work), event.scope, self.meter)
        event.task = self._loop.create_task(run)

    async def _run(self, event: _Event, work: Any) -> None:
        scope = event.scope
        CURRENT.set(scope)
        event.running = True
        try:
            if event.cancelled:
                work.close()  # never started: the handler is not called at all
            else:
                await work
        except asyncio.CancelledError as exc:
            task = event.task
            if task is None or not task.cancelling():  # not the supervisor's Cancel: an awaited
                self._report(scope, _awaited_cancelled(exc))
            # else the supervisor cancelled this request; it already answered the client
        except BaseException as exc:  # noqa: BLE001 - report every failure of user code
            self._report(scope, exc)
        try:
            if scope.background:
                await self._drain_background(scope)
        finally:
            if scope.cpu_exceeded:  # caught by the code, which then finished as if it had not
                self._report_cpu(scope)
            if self.events.pop(scope.rid, None) is not None:
                self.meter.leave()
            if not event.done_sent:
                scope.ended = True
                self._ending(scope.rid)
                self.send(Done(scope.rid, self._cpu_us(scope)))
            # Over, as workerd's IoContext is once the response is sent and the waitUntil work
            # done: what the request left running is cancelled (only its own tasks).
            cancelled = scope.close()
            if cancelled:
                self.strays.cancelled(scope.rid, cancelled)

    def _ending(self, rid: int) -> None:
        """Request ``rid`` ends with the next frame: its dropped console lines are told first."""
        console = self.console
        if console is not None and console.gate is not None and console.gate.tally:
            console.ending(rid)

    async def _fetch(self, event: _Event, message: Request, body: Any) -> None:
        if self.entry.fetch is None:
            self.send(RequestError(message.rid, "no_handler", NO_FETCH, ""))
            return
        request = api.Request._incoming(
            message.method, message.url, Headers._from_pairs(message.headers), body
        )
        result = await self.entry.fetch(request, self.env, event.scope.ctx)
        if not isinstance(result, api.Response):
            result = await _settled(result)
            if not isinstance(result, api.Response):
                raise _InvalidResponse(invalid_response_message(result))
        await self._respond(event, result)

    async def _scheduled(self, event: _Event, message: Scheduled) -> None:
        if self.entry.scheduled is None:
            self.send(RequestError(message.rid, "no_handler", NO_SCHEDULED, ""))
            return
        controller = entrypoints.ScheduledController(message.cron, message.scheduled_time)
        await _settled(await self.entry.scheduled(controller, self.env, event.scope.ctx))

    async def _respond(self, event: _Event, response: api.Response) -> None:
        scope = event.scope
        if scope.cpu_exceeded:  # the handler caught the CPU interrupt and returned
            raise CpuLimitInterrupt()
        rid = scope.rid
        body = response._take_body()
        headers = response._headers.to_list()
        coding = encoding.output_coding(headers, response._encode_manual)
        if coding is not None:
            body, headers = _encoded_for_output(body, headers, coding)
        over = _headers_over_limit(headers)
        if over is not None:  # the supervisor would refuse the frame: say which limit instead
            self.send(RequestError(rid, "response_headers", over, ""))
            return
        if body is None or (isinstance(body, bytes) and len(body) <= INLINE_RESPONSE_BYTES):
            done = not event.scope.background
            event.done_sent = scope.ended = done
            if done:
                self._ending(rid)
            status_text = response._wire_status_text
            cpu_us = self._cpu_us(scope)
            self.send(Response(rid, response.status, headers, body, 0, done, status_text, cpu_us))
            return
        if isinstance(body, ReadableStream):
            body = body.hand_over()  # locks it: the handler cannot read it behind our back
            if body is None:
                raise TypeError("This ReadableStream is locked: it has already been read")
        if isinstance(body, InStream) and body.untouched:
            self.send(
                PipeResponse(rid, response.status, headers, body.sid, response._wire_status_text)
            )
            try:
                await body.wait_ended()  # the supervisor sent it; the request may now finish
            finally:
                self.mux.release_in(body)
            return
        if isinstance(body, bytes) and not any(k.lower() == "content-length" for k, _ in headers):
            headers.append(("content-length", str(len(body))))  # lets the platform refuse early
        out = self.mux.open_out()
        status_text, cpu_us = response._wire_status_text, self._cpu_us(scope)
        head = Response(rid, response.status, headers, None, out.sid, False, status_text, cpu_us)
        self.send(head)
        try:
            if isinstance(body, bytes):
                await out.send(body)
            else:
                async for chunk in api._as_bytes(body):
                    if scope.cpu_exceeded:  # the body's code caught the CPU interrupt
                        raise CpuLimitInterrupt()
                    await out.send(chunk)
            if scope.cpu_exceeded:
                raise CpuLimitInterrupt()
            out.end()
        except StreamAborted:
            pass  # the supervisor stopped reading (client gone or response too large)
        except CpuLimitInterrupt:
            # The limit error first: the supervisor cuts the stream with it, so the request is
            # logged as over its CPU limit rather than as a body that merely broke off.
            self._report_cpu(scope)
            out.abort(CPU_EXCEEDED_MESSAGE)
            raise
        except BaseException as exc:
            out.abort(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.mux.release_out(out)

    async def _drain_background(self, scope: RequestScope) -> None:
        while scope.background:
            tasks, scope.background = scope.background, []
            results = await asyncio.gather(*tasks, return_exceptions=True)
            for result in results:
                if isinstance(result, asyncio.CancelledError):
                    continue
                if isinstance(result, BaseException):
                    self._report(scope, result, background=True)

    def _cpu_us(self, scope: RequestScope) -> int:
        """The event's CPU so far (this step's included), in microseconds."""
        return round(self.meter.used(scope) * 1e6)

    def _report_cpu(self, scope: RequestScope) -> None:
        """The event is over its CPU limit (said once, however many places notice)."""
        if not scope.cpu_reported:
            scope.cpu_reported = True
            self.send(RequestError(scope.rid, "cpu", CPU_EXCEEDED_MESSAGE, ""))

    def _report(self, scope: RequestScope, exc: BaseException, background: bool = False) -> None:
        rid = scope.rid
        if scope.cpu_exceeded or isinstance(exc, CpuLimitInterrupt):
            self._report_cpu(scope)  # whatever the code raised after catching the interrupt
            return
        if isinstance(exc, MemoryError):
            self.send(RequestError(rid, "memory", "Worker exceeded memory limit.", ""))
            return
        kind = "invalid_response" if isinstance(exc, _InvalidResponse) else "exception"
        if background:
            kind = "background"
        message = user_message(exc)[:60_000]
        trace = "" if isinstance(exc, _InvalidResponse) else format_user_traceback(exc)
        self.send(RequestError(rid, kind, message, trace))


def _encoded_for_output(
    body: Any, headers: list[tuple[str, str]], coding: str
) -> tuple[Any, list[Any]]:
    """A body under ``content-encoding: gzip`` or ``br`` as workerd sends it: a fetched body
    still encoded in that coding and unread goes as it came (with its length); any other is
    compressed here (one fetched under the other coding is decoded first)."""
    if isinstance(body, ReadableStream):
        body = body.hand_over()
        if body is None:
            raise TypeError("This ReadableStream is locked: it has already been read")
    if isinstance(body, encoding.EncodedBody) and body.untouched and body.coding == coding:
        return body.raw, headers
    headers = encoding.without_length(headers)
    if body is None:
        return None, headers
    if isinstance(body, bytes):
        whole = encoding.gzip_bytes if coding == "gzip" else encoding.brotli_bytes
        return whole(body), headers
    stream = encoding.gzip_stream if coding == "gzip" else encoding.brotli_stream
    return stream(api._as_bytes(body)), headers


async def _settled(result: Any) -> Any:
    """What a handler's result resolves to on the platform: workerd awaits the promise of the
    Python call, and a JS promise adopts any thenable it resolves to, however deep (Pyodide's
    proxy of a coroutine or future is one). So ``return handle(request)`` without ``await`` in
    an async handler answers with what ``handle`` returns; valid there, so no warning here."""
    seen: list[Any] = []  # the objects, not their ids: a freed one's id is reused
    while inspect.isawaitable(result):
        if any(result is earlier for earlier in seen):  # a cycle: JS refuses it, not spins
            raise TypeError("Chaining cycle detected for promise")
        seen.append(result)
        result = await result
    return result


AWAITED_CANCELLED = (
    "the handler awaited a task that was cancelled, such as one cancelled when "
    "the request that started it ended (a task started without ctx.waitUntil ends with its "
    "request, as on Cloudflare)"
)


def _awaited_cancelled(exc: asyncio.CancelledError) -> asyncio.CancelledError:
    """The same error, where it was raised, saying what most likely cancelled it: a bare
    CancelledError reads as if the request itself had been cancelled."""
    error = asyncio.CancelledError(AWAITED_CANCELLED).with_traceback(exc.__traceback__)
    error.__context__, error.__cause__ = exc.__context__, exc.__cause__
    return error


class _InvalidResponse(TypeError):
    """The handler returned something that is not a Response (reported as the TypeError it
    is: ``tracebacks.user_message`` names the public class)."""


# workerd's words when a fetch handler resolves to anything but a Response.
NOT_A_RESPONSE = "Incorrect type for Promise: the Promise did not resolve to 'Response'."


def invalid_response_message(result: object) -> str:
    """What the handler returned, what was expected, and how to make one."""
    kind = type(result).__name__
    how = "from workers import Response; return Response(...)"
    if isinstance(result, dict | list):
        how += f", or Response.json(value) for a {kind}"
    return f"{NOT_A_RESPONSE} fetch() returned {kind}, expected a Response ({how})"
