"""The CPU each request's own code runs in this isolate, metered per task step.

An isolate runs several requests' tasks on one thread, one step at a time (as a JS isolate runs
one event's code at a time), so a request's CPU is the thread CPU of its tasks' steps: every task
created while a request's scope is current (its handler's task, the tasks it starts, its
``waitUntil`` work) runs its coroutine through ``Metered``, which reads the thread's CPU clock
around each step and adds the difference to the scope; ember's own callbacks between steps are
charged to nobody here. Only while two or more events are live: a clock reading is a syscall
(1.7 µs here), and most isolates serve one request at a time, where the split is trivial. While
one event is live (``solo``) the steps run unmetered and the event is charged all the thread's
CPU from the moment it became the only one (ember's own work for it included, as the
supervisor's clock would charge it); clocks are read only when the number of live events
changes between one and more (``enter``, ``leave``) and when a figure is asked for. A leftover
task of an event that already ended, running while another is solo, is charged to that one.

What it is used for:
- ``Response`` and ``Done`` carry the request's figure (what the supervisor logs as its CPU);
- at the end of a step that took a request past its limit, the request reports the limit error;
- on SIGXCPU (the supervisor cannot rule out that a request is over its limit) the running
  request's code gets ``CpuLimitInterrupt`` if that request is over; otherwise the split is
  sent as a ``CpuReport`` as soon as the loop runs, so the supervisor stops asking.

None of this is trusted: hostile code in the isolate can forge every figure, so the supervisor
keeps its own bound on the isolate's total (``ember/runtime/cpushare.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from ember.runtime.isolate.scope import (
    CPU_EXCEEDED_MESSAGE,
    CURRENT,
    CpuLimitInterrupt,
    RequestScope,
)
from ember.runtime.protocol import CpuReport, Message, RequestError

_thread_time = time.thread_time


class CpuMeter:
    """This isolate's per-request CPU (one per isolate; its steps never nest)."""

    def __init__(
        self, limit_s: float, send: Callable[[Message], None], *, unmetered_solo: bool = True
    ) -> None:
        self.limit = limit_s
        # False: every step is metered, one event live or many (the reference the tests hold
        # the unmetered solo stretches to).
        self.unmetered_solo = unmetered_solo
        self.send = send
        self.running: RequestScope | None = None  # the scope whose step runs now
        self.step_start = 0.0  # the thread's CPU when that step (or the last one) began
        self.mark = 0.0  # the thread's CPU when the last step ended
        self.live: Mapping[int, Any] = {}  # rid -> event with ``.scope`` (EventRunner.events)
        self.solo: RequestScope | None = None  # the only live event's scope: steps unmetered
        self.solo_since = 0.0  # the thread's CPU when it became the only one
        self._report_due = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Meter the tasks created in a request's scope from now on."""
        self._loop = loop
        loop.set_task_factory(self._task)

    def _task(self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task:
        scope = CURRENT.get(None)
        if scope is not None and type(coro) is not Metered:
            coro = Metered(coro, scope, self)
        return asyncio.Task(coro, loop=loop, **kwargs)

    def enter(self) -> None:
        """An event was added to ``live``."""
        if not self.unmetered_solo:
            return
        if len(self.live) == 1:
            (event,) = self.live.values()
            self.solo, self.solo_since = event.scope, _thread_time()
        elif self.solo is not None:  # a second one: from now on each step is metered
            self.mark = now = _thread_time()
            self.solo.cpu += now - self.solo_since
            self.solo = None

    def leave(self) -> None:
        """An event was removed from ``live`` (its task may still be in its last step)."""
        if not self.unmetered_solo or (self.solo is None and len(self.live) > 1):
            return
        self.mark = now = _thread_time()
        if self.solo is not None:  # the only one ended
            self.solo.cpu += now - self.solo_since
            self.solo = None
        if len(self.live) == 1:  # one left: its steps go unmetered from now
            (event,) = self.live.values()
            self.solo, self.solo_since = event.scope, now

    def used(self, scope: RequestScope) -> float:
        """``scope``'s CPU seconds, with the step (or callback in its context) running now."""
        now = _thread_time()
        if self.solo is scope:
            return scope.cpu + now - self.solo_since
        return scope.cpu + now - (self.step_start if self.running is scope else self.mark)

    def charge(self, scope: RequestScope, start: float) -> None:
        """A step of ``scope`` that began at thread CPU ``start`` ended."""
        self.running = None
        self.mark = now = _thread_time()
        scope.cpu += now - start
        if scope.cpu > self.limit and not scope.cpu_reported and not scope.ended:
            # Past its limit within a step that ended: the supervisor fails it (and cancels
            # its task) on this report, rather than when it next runs.
            scope.cpu_exceeded = scope.cpu_reported = True
            self.send(RequestError(scope.rid, "cpu", CPU_EXCEEDED_MESSAGE, ""))

    def on_signal(self, signum: int, frame: Any) -> None:
        """SIGXCPU: interrupt the running request if it is over its limit, else report.

        Runs in the main thread between bytecodes, in the context of the running task. The
        scope keeps the interrupt: code that catches it still ends with the limit error.
        """
        scope = CURRENT.get(None)
        if scope is not None and (scope.cpu_exceeded or self.used(scope) > self.limit):
            scope.cpu_exceeded = True
            raise CpuLimitInterrupt()
        if not self._report_due and self._loop is not None:
            # Not written from here: the frame writer may be in the middle of a frame.
            self._report_due = True
            self._loop.call_soon_threadsafe(self._report)

    def _report(self) -> None:
        self._report_due = False
        now, solo = _thread_time(), self.solo
        usage = [
            [rid, round((e.scope.cpu + (now - self.solo_since if e.scope is solo else 0)) * 1e6)]
            for rid, e in self.live.items()
        ]
        self.send(CpuReport(round(time.process_time() * 1e6), usage))


class Metered(Coroutine[Any, Any, Any]):
    """A task's coroutine, each step of which is charged to its request's scope."""

    __slots__ = ("_coro", "_scope", "_meter")

    def __init__(self, coro: Any, scope: RequestScope, meter: CpuMeter) -> None:
        self._coro = coro
        self._scope = scope
        self._meter = meter

    def send(self, value: Any) -> Any:
        meter = self._meter
        if meter.solo is not None:  # one event live: it is charged everything (CpuMeter.enter)
            return self._coro.send(value)
        meter.running = self._scope
        meter.step_start = start = _thread_time()
        try:
            return self._coro.send(value)
        finally:
            meter.charge(self._scope, start)

    def __next__(self) -> Any:
        return self.send(None)

    def throw(self, *args: Any) -> Any:  # type: ignore[override]
        meter = self._meter
        if meter.solo is not None:
            return self._coro.throw(*args)
        meter.running = self._scope
        meter.step_start = start = _thread_time()
        try:
            return self._coro.throw(*args)
        finally:
            meter.charge(self._scope, start)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Any:
        return self._coro.__await__()

    def __iter__(self) -> Any:
        return self

    @property
    def cr_frame(self) -> Any:  # asyncio's task repr and stack walk look at these
        return getattr(self._coro, "cr_frame", None)

    @property
    def cr_running(self) -> bool:
        return bool(getattr(self._coro, "cr_running", False))

    @property
    def cr_await(self) -> Any:
        return getattr(self._coro, "cr_await", None)

    @property
    def cr_code(self) -> Any:
        return getattr(self._coro, "cr_code", None)

    def __repr__(self) -> str:
        return repr(self._coro)
