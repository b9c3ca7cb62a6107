"""What an isolate's frames mean to the supervisor (the reading half of ``process.py``).

Each decoded frame from the isolate is routed to its request, stream, binding call or the
handshake; a frame that makes no sense where it arrives raises ``ProtocolError``, which
``IsolateProcess.data_received`` turns into killing the isolate. Separate from ``process.py`` so
that the one place that trusts nothing the isolate says reads on its own; sending, startup and
ending stay there.

``FrameDispatch`` is a mixin of ``IsolateProcess`` (like ``watchdog.LimitWatch``) so that the hot
per-frame path costs no extra indirection.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from ember.errors import ProtocolError
from ember.runtime import cpushare
from ember.runtime import limits as L
from ember.runtime.calls import CallRunner
from ember.runtime.console_gate import ConsoleGate
from ember.runtime.inflight import InFlight
from ember.runtime.lifecycle import State, WorkerLoadError
from ember.runtime.monitor import CpuClock, process_cpu_seconds, process_parent
from ember.runtime.mux import Mux
from ember.runtime.protocol import (
    Abort,
    Call,
    CancelCall,
    CpuReport,
    Credit,
    Data,
    Done,
    End,
    Hello,
    LoadError,
    Log,
    LogDropped,
    Message,
    PipeResponse,
    Ready,
    RequestError,
    Response,
)


class FrameDispatch:
    """Routes each frame from one isolate; raises ProtocolError for one that does not fit."""

    # Set by IsolateProcess.__init__; read and updated here.
    state: State
    pid: int
    spawn_pid: int
    hooks: Any  # ProcessHooks, see supervisor.py
    mux: Mux
    calls: CallRunner
    clock: CpuClock
    console_gate: ConsoleGate | None
    inflight: dict[int, InFlight]
    handlers: list[str]
    limits: L.Limits
    last_active: float
    _next_rid: int
    _hello: asyncio.Future[None]
    _ready: asyncio.Future[None]
    _interrupt: tuple[int, float, float] | None
    _cpu_base: float
    _idle_cpu: float

    if TYPE_CHECKING:  # defined by IsolateProcess and LimitWatch

        def kill(self, error: L.PlatformError, reason: str, fail_ready: bool = True) -> None: ...

        def cpu(self) -> float: ...

    def _on_hello(self, message: Hello) -> None:
        if self._hello.done():
            raise ProtocolError("second Hello")
        pid = message.pid
        if pid != self.spawn_pid and process_parent(pid) != self.spawn_pid:
            raise ProtocolError(f"Hello names pid {pid}, which is not the spawned isolate")
        self.pid = pid
        self.clock.watch(pid)
        self._cpu_base = process_cpu_seconds(pid)
        self._hello.set_result(None)

    def _dispatch(self, message: Message) -> None:
        if not self._hello.done():
            if not isinstance(message, Hello):
                raise ProtocolError(f"expected Hello first, got {type(message).__name__}")
            self._on_hello(message)
        elif type(message) is Response or type(message) is PipeResponse:  # most common first
            request = self._request(message.rid)
            if request is not None:
                if type(message) is Response:
                    self._own_cpu(request, message.cpu_us, message.done)
                if request.cpu_exceeded:  # its code caught the CPU interrupt and answered
                    self.over_cpu_limit(request)
                request.on_response(message)
            elif type(message) is Response and message.sid:  # keep the stream table right
                self.mux.release_in(self.mux.expect_in(message.sid))
        elif isinstance(message, Data | End | Abort | Credit):
            self.mux.on_frame(message)
        elif isinstance(message, Call):
            request = self.inflight.get(message.rid)
            if request is None:
                self.calls.on_call(message, None)
            else:
                self.calls.on_call(message, request.counters, request.loops_left, request.root_path)
        elif isinstance(message, CancelCall):
            self.calls.cancel(message.cid)
        elif isinstance(message, Log):
            gate = self.console_gate
            if gate is None:
                request = self.inflight.get(message.rid) if message.rid else None
                self.hooks.console(self, message.level, message.message, request)
            elif gate.admit(message.rid, len(message.message)):  # else dropped, nothing built
                if gate.tally:
                    self._console_dropped(gate.take())
                request = self.inflight.get(message.rid) if message.rid else None
                self.hooks.console(self, message.level, message.message, request)
        elif isinstance(message, LogDropped):
            gate = self.console_gate
            # Metered as one line, or a flood of these would be a flood of notices.
            if gate is None or gate.admit(message.rid, 0):
                self._console_dropped([(message.rid, message.lines, message.chars)])
            else:
                gate.drop(message.rid, message.lines - 1, message.chars)
        elif isinstance(message, RequestError):
            self._on_request_error(message)
        elif isinstance(message, Done):
            request = self.inflight.get(message.rid)
            if request is not None:
                self._own_cpu(request, message.cpu_us, True)
                if request.cpu_exceeded:  # a cron (or waitUntil) that caught the interrupt
                    self.over_cpu_limit(request)
                request.finish()
        elif isinstance(message, CpuReport):
            self._on_cpu_report(message)
        elif isinstance(message, Ready) and self.state is State.STARTING:
            self.handlers = [h for h in message.handlers if isinstance(h, str)][:8]
            self.state, self.last_active = State.READY, time.monotonic()  # not the LRU yet
            self._idle_cpu = self.cpu()
            self._ready.set_result(None)
        elif isinstance(message, LoadError) and self.state is State.STARTING:
            error = L.NO_HANDLER if message.kind == "no_handler" else L.STARTUP_FAILED
            self._ready.set_exception(WorkerLoadError(error, message.message, message.traceback))
            self.kill(error, "module failed to load", fail_ready=False)
        else:
            raise ProtocolError(f"unexpected {type(message).__name__}")

    def _console_dropped(self, dropped: list[tuple[int, int, int]]) -> None:
        """Tell each request's log how many of its console lines were dropped."""
        for rid, lines, chars in dropped:
            if lines > 0:
                request = self.inflight.get(rid) if rid else None
                self.hooks.console_dropped(self, lines, chars, request)

    def _request(self, rid: int) -> InFlight | None:
        """The request ``rid``; None if it already ended (late frame); ProtocolError if unknown."""
        request = self.inflight.get(rid)
        if request is None and not 0 < rid <= self._next_rid:
            raise ProtocolError(f"frame for request {rid}, which was never sent")
        return request

    def _own_cpu(self, request: InFlight, cpu_us: int, final: bool) -> None:
        """The isolate's figure for ``request``'s own CPU (with its end, if ``final``); past
        the limit, the request ends with the limit error as if it had been interrupted."""
        now = self.clock.shared()
        cpushare.report(request, cpu_us, now, now)
        request.cpu_final = final
        if request.cpu_known > self.limits.cpu_ms / 1000 and not request.finished.done():
            request.cpu_exceeded = True

    def _on_cpu_report(self, message: CpuReport) -> None:
        """Each in-flight request's CPU as of the isolate's clock reading ``at_us``."""
        if len(message.usage) > max(len(self.inflight), 1) * 4 + 64:
            raise ProtocolError(f"CpuReport of {len(message.usage)} requests")
        now, at = self.clock.shared(), message.at_us / 1e6
        for item in message.usage:
            if (
                type(item) is not list
                or len(item) != 2
                or not all(type(v) is int and 0 <= v < 1 << 53 for v in item)
            ):
                raise ProtocolError("CpuReport: expected [request id, microseconds] pairs")
            request = self.inflight.get(item[0])
            if request is not None:
                cpushare.report(request, item[1], at, now)
                if request.cpu_known > self.limits.cpu_ms / 1000:
                    self.over_cpu_limit(request)  # it is not running: no interrupt needed
                    if self.state is State.DEAD:
                        return

    def _on_request_error(self, message: RequestError) -> None:
        request = self.inflight.get(message.rid)
        if message.kind == "cpu":
            self.over_cpu_limit(request)
            return
        if message.kind == "memory":
            if request is not None:
                request.fail(L.MEMORY_EXCEEDED)
            self.hooks.recycle(self, L.MEMORY_EXCEEDED.message)
            return
        if request is not None and request.cpu_exceeded:
            self.over_cpu_limit(request)  # it caught the CPU interrupt, then raised another
        elif request is not None:
            request.on_error(message.kind, message.message, message.traceback)
        else:
            self.hooks.exception(self, message.message, message.traceback)

    def over_cpu_limit(self, request: InFlight | None) -> None:
        """``request`` ran past its CPU limit: the isolate said so, or the supervisor's
        interrupt was sent for it and its code answered anyway (it caught the interrupt, or
        took the signal from the isolate's own code). It ends with the limit error, as an
        uncaught interrupt does; the others in flight carry on, charged only their own CPU; the
        isolate is replaced."""
        if self._interrupt is not None:
            for other in self.inflight.values():
                if other is not request:
                    other.cpu_exceeded = False  # the interrupt was for the one over
            self._interrupt = None
        if request is not None:
            request.fail(L.CPU_EXCEEDED, cancel=True)
        self.hooks.recycle(self, L.CPU_EXCEEDED.message)
