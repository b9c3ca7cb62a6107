"""One request in flight in one isolate: its response head, body stream, limits and outcome.

The supervisor answers each request exactly once: with the worker's response, or with the
platform's error response if the worker failed, exceeded a limit, crashed or broke the
protocol. A request stays in flight after its response until the isolate says Done (its
``waitUntil`` work), so its calls and CPU stay accounted; the wall-time deadline then becomes
the waitUntil budget.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ember.errors import ProtocolError
from ember.runtime import cancelgrace, cpushare, edge_gzip
from ember.runtime import limits as L
from ember.runtime.http import ClientDisconnected, HttpResponse, ResponseAborted
from ember.runtime.lifecycle import State
from ember.runtime.mux import InStream, OutStream, StreamAborted
from ember.runtime.pipe import PipedBody, ended_body
from ember.runtime.protocol import Cancel, PipeResponse, Response
from ember.runtime.worker_loops import MAX_NESTED

if TYPE_CHECKING:
    from ember.runtime.process import IsolateProcess

CANCEL_GRACE_S = 2.0


class InFlight:
    """A request or scheduled event the supervisor is waiting on."""

    def __init__(
        self, process: IsolateProcess, rid: int, kind: str, method: str, url: str, cpu_start: float
    ) -> None:
        """``cpu_start``: the isolate's process CPU clock as the request is sent."""
        loop = process.loop
        self.process = process
        self.rid = rid
        self.kind = kind
        self.method = method
        self.url = url
        self.headers: list[tuple[str, str]] = []
        # The invocations its subrequests may still cause (cf-ew-via: worker_loops.py).
        self.loops_left = MAX_NESTED
        self.root_path = ""  # the path prefix it came by (``HttpRequest.root_path``)
        self.scheduled_time = 0.0
        # (level, message, epoch ms) lines and (message, traceback, epoch ms) exceptions of
        # this invocation, kept only while a tail watches its deployment (None otherwise).
        self.trace: list[tuple[str, str, float]] | None = None
        self.trace_exceptions: list[tuple[str, str, float]] = []
        self.trace_bytes = 0  # text kept in trace and trace_exceptions (bounded: TRACE_BYTES)
        self.trace_truncated = False  # lines were dropped past TRACE_BYTES
        self.notes: list[str] | None = None  # ember dev: its AI notes, for its error page
        # Its own CPU as the isolate reports it, and the isolate's CPU clock at that report
        # (cpushare.py); cpu_final: the figure came with its end (Response done, or Done).
        self.cpu_known = 0.0
        self.cpu_seen = cpu_start
        self.cpu_final = False
        self.cpu_used = 0.0
        # The supervisor's CPU interrupt was sent for this request (it passed its limit): from
        # then on it can only end over its CPU limit, whatever its code answers (dispatch.py).
        self.cpu_exceeded = False
        self.started = time.monotonic()
        self.deadline = self.started + process.limits.wall_ms / 1000
        self.head: asyncio.Future[HttpResponse] = loop.create_future()
        self.finished: asyncio.Future[str] = loop.create_future()
        self.counters: dict[str, int] | None = {}  # None: abandoned, its calls are refused
        self.abandoned = False  # it ignored its cancellation; the isolate drains (cancelgrace)
        self.status = 0
        self.outcome = "ok"
        self.error: tuple[str, str] | None = None  # (message, traceback) of a handler exception
        self._stream: InStream | PipedBody | None = None
        self._pump: asyncio.Task[None] | None = None
        self._cancel_sent: float | None = None
        self._reads_at_cancel = 0  # the isolate's reads at the cancel, then at half the grace
        self._half_grace = False
        self._gone = False  # client_gone ran (the HTTP paths may each report a client leaving)
        self._logged = False

    @property
    def accept(self) -> str:
        """The request's Accept header (for the error page's format), "" if none."""
        for name, value in self.headers:
            if name.lower() == "accept":
                return value
        return ""

    # -- from the isolate ---------------------------------------------------------------------

    def on_response(self, message: Response | PipeResponse) -> None:
        """The handler returned a response."""
        if isinstance(message, PipeResponse):
            self._on_pipe(message)
            return
        if self.head.done():
            self._late_response()
            if message.sid:  # we already answered (a limit); register and drop its stream
                self.process.mux.release_in(self.process.mux.expect_in(message.sid))
            if message.done:  # no Done frame follows one that says it is the last
                self.finish()
            return
        self.status = message.status
        if message.sid:
            if _declared_length(message.headers) > self.process.limits.max_response_bytes:
                self.process.mux.release_in(self.process.mux.expect_in(message.sid))
                self.fail(L.RESPONSE_TOO_LARGE, cancel=True)  # before a status line goes out
                return
            self._stream = self.process.mux.expect_in(message.sid)
            body: Any = ResponseStream(self, self._stream)
        else:
            body = message.body or b""
            if len(body) > self.process.limits.max_response_bytes:
                self.fail(L.RESPONSE_TOO_LARGE, cancel=True)
                return
        headers = [(k, v) for k, v in message.headers if k.lower() not in _HOP_BY_HOP]
        self.head.set_result(
            self._for_client(
                HttpResponse(message.status, headers, body, status_text=message.status_text)
            )
        )
        if message.done:
            self.finish()  # before logging, so the log line reuses its CPU reading
        if not message.sid:
            self.body_complete()

    def _late_response(self) -> None:
        """A response came for a request whose head is already settled: dropped when the head
        was a limit's answer or was cancelled; from an isolate that answers twice, a protocol
        violation (ProtocolError)."""
        if self.head.cancelled():
            # The HTTP task awaiting the head was cancelled (its client left); cancelling a task
            # cancels the future it awaits at once, while the task learns of it (and calls
            # client_gone) only on its next step: this response fell in between.
            self.client_gone()
        elif self._cancel_sent is None and self.outcome == "ok":
            raise ProtocolError(f"second response for request {self.rid}")

    def _on_pipe(self, message: PipeResponse) -> None:
        """The handler returned a binding's reply stream unread: the supervisor sends it."""
        if self.head.done():
            self._late_response()
            return  # already answered (a limit); the call ends with the request
        self.status = message.status
        if _declared_length(message.headers) > self.process.limits.max_response_bytes:
            self.fail(L.RESPONSE_TOO_LARGE, cancel=True)
            return
        body = self.process.calls.pipe(self.rid, message.sid)
        if body is None:  # the call ended before the hand-back arrived: cut, as a read would be
            body = ended_body(message.sid, "the binding's stream ended before it was sent")
        self._stream = body
        headers = [(k, v) for k, v in message.headers if k.lower() not in _HOP_BY_HOP]
        if body.length is not None:
            # A fetched response passed through unread: its upstream's length, which the
            # subrequest read checks, goes out as workerd sends it (not chunked). The worker's
            # own content-length stays dropped, as on a body it streams itself.
            headers.append(("content-length", str(body.length)))
        stream = ResponseStream(self, body)
        self.head.set_result(
            self._for_client(
                HttpResponse(message.status, headers, stream, status_text=message.status_text)
            )
        )

    def _for_client(self, response: HttpResponse) -> HttpResponse:
        """The worker's response as the edge sends it to this request's client: gzip decoded
        for a client that did not accept it (``edge_gzip.py``)."""
        body = response.body
        return edge_gzip.for_client(
            response,
            self.headers,
            self.method,
            self.process.limits.max_response_bytes,
            over_limit=lambda: self.fail(L.RESPONSE_TOO_LARGE, cancel=True),
            broken=body.cut if isinstance(body, ResponseStream) else None,
        )

    def on_error(self, kind: str, message: str, traceback: str) -> None:
        """The handler raised (or returned something that is not a Response)."""
        self.error = (message, traceback)
        self.process.hooks.exception(self.process, message, traceback, self)
        if kind == "background":
            # A failed waitUntil task: a fetch's answer stands, a scheduled event ends
            # "exception" (workerd's taskFailed sets the status its scheduled result carries).
            if self.kind == "scheduled" and self.outcome == "ok":
                self.outcome = "exception"
            return
        self.outcome = "exception"
        if not self.head.done():
            response = self.process.hooks.error_response(self, kind, message, traceback)
            self.status = response.status
            self.head.set_result(response)
            self._log()

    # -- from the supervisor ------------------------------------------------------------------

    def fail(self, error: L.PlatformError, cancel: bool = False) -> None:
        """Answer with the platform's error (or cut the streamed body) and end the request."""
        if self.finished.done():
            return
        self.outcome = error.tag
        if not self.head.done():
            self.status = error.status
            self.head.set_result(error_response(error))
        elif self._stream is not None:
            self._stream.fail(error.message)
        if cancel:
            self.process.send(Cancel(self.rid, True))
        self._log()
        self.finish()

    def client_gone(self) -> None:
        """The HTTP client went away: cancel the handler and its binding calls now (once)."""
        if self.finished.done() or self._gone:
            return
        self._gone = True
        if self.outcome == "ok":
            self.outcome = "canceled"
        self.process.send(Cancel(self.rid, False))
        self.process.calls.cancel_request(self.rid)
        self._log()
        self.deadline = min(
            self.deadline, time.monotonic() + self.process.limits.background_ms / 1000
        )

    def body_complete(self) -> None:
        """The whole response went out; the waitUntil budget starts now."""
        self._log()
        if not self.finished.done():
            self.deadline = time.monotonic() + self.process.limits.background_ms / 1000

    def check_deadline(self, now: float) -> None:
        """Past the wall-time deadline: cancel; past the grace too: kill the isolate."""
        if now <= self.deadline or self.abandoned:
            return
        if self._cancel_sent is None:
            self._cancel_sent = now
            self._reads_at_cancel = self.process.reads
            self.outcome = L.WALL_EXCEEDED.tag if self.outcome == "ok" else self.outcome
            self.process.send(Cancel(self.rid, True))
            self.process.calls.cancel_request(self.rid)
            if not self.head.done():
                self.status = L.WALL_EXCEEDED.status
                self.head.set_result(error_response(L.WALL_EXCEEDED))
            elif self._stream is not None:
                self._stream.fail(L.WALL_EXCEEDED.message)
            self._log()
        elif now - self._cancel_sent > CANCEL_GRACE_S:
            cancelgrace.ignored_cancellation(self, self._reads_at_cancel)
        elif not self._half_grace and now - self._cancel_sent > CANCEL_GRACE_S / 2:
            # Is the isolate alive? Frames it sent before a block may still be read early in
            # the grace: only those read in its second half say its event loop still runs.
            self._half_grace = True
            self._reads_at_cancel = self.process.reads

    def finish(self) -> None:
        """The request is over (Done, failure or kill)."""
        if self.finished.done():
            return
        cpu = self.process.clock.shared()
        self.cpu_used = self.own_cpu(cpu)
        if self.kind == "fetch" and not self.head.done():
            if not self._gone:  # (a cancelled handler need not answer; else only a broken one)
                self.outcome = L.NO_RESPONSE.tag
                self.status = L.NO_RESPONSE.status
            self.head.set_result(error_response(L.NO_RESPONSE))
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
        if self._stream is not None:
            if not self._stream.ended:
                self._stream.fail("request finished")
            if isinstance(self._stream, InStream):
                self.process.mux.release_in(self._stream)
        self.finished.set_result(self.outcome)
        self.process.request_finished(self, cpu)
        if self.process.state is State.DRAINING:
            cancelgrace.after_finish(self.process)

    def own_cpu(self, cpu: float) -> float:
        """Its CPU seconds as logged, the isolate's clock reading ``cpu``: what the isolate
        reported; for a request stopped at its CPU limit with no final figure, the most it can
        have used (cpushare.possible)."""
        if not self.cpu_final and (self.cpu_exceeded or self.outcome == L.CPU_EXCEEDED.tag):
            return cpushare.possible(self, cpu)
        return self.cpu_known

    def pump_body(self, out: OutStream, body: AsyncIterator[bytes]) -> None:
        """Stream the client's request body to the isolate, enforcing the size limit."""
        self._pump = asyncio.ensure_future(self._pump_body(out, body))

    async def _pump_body(self, out: OutStream, body: AsyncIterator[bytes]) -> None:
        limit = self.process.limits.max_request_bytes
        try:
            async for chunk in body:
                if out.sent + len(chunk) > limit:
                    too_large = L.request_too_large(limit)
                    out.abort(too_large.message)
                    self.fail(too_large, cancel=True)
                    return
                await out.send(chunk)
            out.end()
        except ClientDisconnected:
            out.abort("client disconnected")
            self.client_gone()
        except StreamAborted:
            pass
        finally:
            self.process.mux.release_out(out)

    def _log(self) -> None:
        if not self._logged:
            self._logged = True
            self.process.hooks.request_logged(self.process, self)


class ResponseStream:
    """The worker's streamed response body, as the router reads it (size-limited)."""

    def __init__(self, request: InFlight, stream: InStream | PipedBody) -> None:
        self._request: Any = request
        self._stream = stream
        self._sent = 0
        self._complete = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await self._stream.__anext__()
        except StopAsyncIteration:
            self._complete = True
            request = self._request
            if request.cpu_exceeded:
                # Its code caught the CPU interrupt and ended the body as if nothing happened
                # (its Done may have been read already): cut, as an uncaught interrupt cuts it.
                if not request.finished.done():
                    request.process.over_cpu_limit(request)
                raise ResponseAborted(L.CPU_EXCEEDED.message) from None
            request.body_complete()
            raise
        except StreamAborted as exc:
            self._complete = True
            # A body cut short (the handler raised mid-stream, a limit) still gets its request
            # line, as every other request does; nothing else would log it.
            self._request._log()
            raise ResponseAborted(str(exc)) from None
        self._sent += len(chunk)
        if self._sent > self._request.process.limits.max_response_bytes:
            self._complete = True
            self._request.fail(L.RESPONSE_TOO_LARGE, cancel=True)
            raise ResponseAborted(L.RESPONSE_TOO_LARGE.message)
        return chunk

    def cut(self) -> None:
        """The body stops here (what ember made of it was invalid: ``edge_gzip.py``). A worker
        still writing it is cancelled as when the client leaves (nobody reads it any more);
        else the request is logged as one whose body was cut short."""
        request = self._request
        if self._complete or request is None:
            return
        self._complete = True
        if self._stream.ended:
            request._log()
        else:
            request.client_gone()

    async def aclose(self) -> None:
        """The router stopped reading: if the body was not complete, the client went away."""
        if not self._complete:
            self._complete = True
            self._request.client_gone()
        # The request's head future holds this body: without the link back, the request's
        # objects are freed when the response ends instead of waiting for the cyclic GC.
        self._request = None
        await self._stream.aclose()


def error_response(error: L.PlatformError) -> HttpResponse:
    """The platform's plain-text error response."""
    return HttpResponse(
        error.status,
        [("content-type", "text/plain;charset=UTF-8"), ("x-ember-error", error.tag)],
        error.body(),
        outcome=error.tag,
    )


def _declared_length(headers: list[tuple[str, str]]) -> int:
    """The body length a response head announces (-1: none, or not a plain number)."""
    for name, value in headers:
        if name.lower() == "content-length":
            return int(value) if value.isdigit() and len(value) < 19 else -1
    return -1


_HOP_BY_HOP = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})
