"""The CPU each request's own code runs in this isolate, metered per task step.

An isolate runs several requests' tasks on one thread, one step at a time (as a JS isolate runs
one event's code at a time), so a request's CPU is the thread CPU of its tasks' steps: every task
created while a request's scope is current (its handler's task, the tasks it starts, its
``waitUntil`` work) runs its coroutine through ``Metered``. The thread's CPU clock is a syscall
(1.7 µs here, a third of a hello-world request's isolate time if read around every step), so:

- while one event is live (``solo``, most isolates most of the time) its steps run unmetered and
  it is charged all the thread's CPU from the moment it became the only one (ember's own work
  for it included, as the supervisor's clock would charge it);
- while several are live each step is timed with the wall clock (vDSO, 0.13 µs), and the thread
  CPU clock is read only to ``settle``: the CPU since the last settle is split among the scopes
  whose steps ran, in proportion to their steps' wall time. A short step does not block, so
  its wall time is its CPU time unless the thread was preempted: the totals are exact, the split
  close. A step whose wall time is long (over ``LONG_STEP_S``, rare: a sync HTTP call, a
  ``time.sleep``, sync file I/O block the thread, as may a long computation) is not weighed by
  its wall time: it ends with a settle in which the short steps are charged their wall time and
  it the rest of the thread's CPU (what it ran, plus ember's own callbacks since the last
  settle). Settles happen when a figure is asked for (a response, Done, a report), when the
  number of live events drops back to one, after a long step, and when a step's wall time could
  take its request past its limit.

``CpuMeter(..., reference=True)`` times every step with the CPU clock instead: the reference the
tests hold the fast path to. A task an event started and left running (``create_task``
without ``waitUntil``) is cancelled when the event ends (``RequestScope.close``), as workerd
cancels a request's outstanding tasks; one that swallows the cancellation gets it again at its
next step, and if it swallows that too its coroutine is closed and the task ends cancelled, so
no request's code runs on after it and no other request is charged for it (those steps are
charged to nobody). What escapes this: a task made with ``asyncio.Task(coro)`` directly (no task
factory) or by ``create_task`` in an empty ``contextvars.Context()`` (no request scope) is neither
metered nor cancelled with a request; its CPU is bounded only by the supervisor's share for the
whole isolate (``ember/runtime/cpushare.py``).

What it is used for:
- ``Response`` and ``Done`` carry the request's figure (what the supervisor logs as its CPU);
- at the end of a step that took a request past its limit, the request reports the limit error;
- on SIGXCPU (the supervisor cannot rule out that a request is over its limit) the running
  request's code gets ``CpuLimitInterrupt`` if that request is over; otherwise the split is
  sent as a ``CpuReport`` as soon as the loop runs, so the supervisor stops asking. The handler
  runs between any two bytecodes, the meter's own included, so it only reads: it computes the
  running request's figure without settling (``peek``), and while the meter is in the middle
  of updating its figures (``busy``) it neither reads them nor raises into ember's code; it
  schedules the report, and the supervisor signals again at its next poll.

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

_thread_time = time.thread_time  # a syscall (1.7 µs here)
_wall = time.perf_counter  # vDSO (0.13 µs)
# A step longer than this (wall seconds) may have blocked: it is charged the thread's CPU rather
# than weighed by its wall time. Far above a hello-world step (tens of µs), so the fast path
# rarely reads the CPU clock for it; a step this long is rare and costs 1000 times the read.
LONG_STEP_S = 0.001
_MODULE = globals()  # this module's frames: SIGXCPU landing in them raises nothing (on_signal)


class CpuMeter:
    """This isolate's per-request CPU (one per isolate; its steps never nest)."""

    def __init__(
        self, limit_s: float, send: Callable[[Message], None], *, reference: bool = False
    ) -> None:
        self.limit = limit_s
        # True: every step is timed with the thread's CPU clock, one event live or many, and
        # nothing is split in proportion (the reference the tests hold the fast path to).
        self.reference = reference
        self.send = send
        self.running: RequestScope | None = None  # the scope whose step runs now
        self.step_start = 0.0  # its step's start: wall clock (CPU clock in the reference)
        self.mark = 0.0  # the reference's thread CPU when the last step ended
        self.cpu_mark = 0.0  # the thread's CPU at the last settle (several events live)
        self.touched: list[RequestScope] = []  # scopes with steps since that settle
        self.live: Mapping[int, Any] = {}  # rid -> event with ``.scope`` (EventRunner.events)
        self.solo: RequestScope | None = None  # the only live event's scope: steps unmetered
        self.solo_since = 0.0  # the thread's CPU when it became the only one
        self._report_due = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # True while the figures are being updated (half-way, a read would be wrong): the
        # SIGXCPU handler, which may land there, then leaves them alone (``on_signal``).
        self.busy = False

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Meter the tasks created in a request's scope from now on."""
        self._loop = loop
        loop.set_task_factory(self._task)

    def _task(self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task:
        scope = CURRENT.get(None)
        # An event's own task comes metered (EventRunner): not a leftover of whichever request
        # was running when its frame arrived (sync code pumping the socket dispatches it).
        if scope is None or type(coro) is Metered:
            return asyncio.Task(coro, loop=loop, **kwargs)
        task = asyncio.Task(Metered(coro, scope, self), loop=loop, **kwargs)
        scope.adopt(task)  # cancelled with the request's other leftovers when it ends
        return task

    # -- how many events are live -------------------------------------------------------------

    def enter(self) -> None:
        """An event was added to ``live`` (from a callback: no step is running)."""
        if self.reference:
            return
        was, self.busy = self.busy, True
        if len(self.live) == 1:
            (event,) = self.live.values()
            self.solo, self.solo_since = event.scope, _thread_time()
        elif self.solo is not None:  # a second one: from now on steps are timed
            self.cpu_mark = now = _thread_time()
            self.solo.cpu += now - self.solo_since
            self.solo = None
        self.busy = was

    def leave(self) -> None:
        """An event was removed from ``live`` (its task may still be in its last step)."""
        if self.reference or (self.solo is None and len(self.live) > 1):
            return
        was, self.busy = self.busy, True
        if self.solo is not None:  # the only one ended
            now = _thread_time()
            self.solo.cpu += now - self.solo_since
            self.solo = None
        else:  # several were live: what their steps used is split before one runs alone
            self._settle(None)
            now = self.cpu_mark
        if len(self.live) == 1:
            (event,) = self.live.values()
            self.solo, self.solo_since = event.scope, now
        self.busy = was

    # -- figures ------------------------------------------------------------------------------

    def settle(self) -> None:
        """Split the thread's CPU since the last settle among the scopes whose steps ran, in
        proportion to their steps' wall time (a short step runs without blocking, so its wall
        time is its CPU time unless the thread was preempted: the total is exact, the split
        close). The step running now counts up to here; if it is long (it may have blocked),
        it gets what the short steps' wall time leaves (``_settle``). CPU with no step
        (ember's own callbacks only) is charged to whoever's steps ran."""
        was, self.busy = self.busy, True
        self._settle(None)
        self.busy = was

    def _settle(self, long: RequestScope | None) -> None:
        """``settle``; ``long``: the scope whose step that just ended was long (not in its
        ``pending``). Callers hold ``busy``."""
        now = _thread_time()
        total, self.cpu_mark = now - self.cpu_mark, now
        running, touched = self.running, self.touched
        if running is not None:
            wall = _wall()
            step, self.step_start = wall - self.step_start, wall
            if step > LONG_STEP_S:
                long = running
            else:
                if running.pending == 0.0:
                    touched.append(running)
                running.pending += step
        weight = 0.0
        for scope in touched:
            weight += scope.pending
        if long is not None and weight < total:
            # The short steps' wall time is their CPU; the long step, whose wall time may be
            # mostly blocked, is charged what is left of the thread's.
            for scope in touched:
                scope.cpu += scope.pending
                scope.pending = 0.0
            long.cpu += total - weight
        elif weight > 0.0:  # (with a long step: the others were preempted; it ran ~nothing)
            for scope in touched:
                scope.cpu += total * scope.pending / weight
                scope.pending = 0.0
        touched.clear()

    def peek(self, scope: RequestScope) -> float:
        """``used(scope)`` without changing any figure (SIGXCPU's handler: it may land in the
        middle of a step's bookkeeping). Only called while not ``busy``."""
        if self.solo is scope:
            return scope.cpu + _thread_time() - self.solo_since
        if self.reference:
            now = _thread_time()
            return scope.cpu + now - (self.step_start if self.running is scope else self.mark)
        if self.solo is not None:
            return scope.cpu
        total = _thread_time() - self.cpu_mark
        weight = 0.0
        for other in self.touched:
            weight += other.pending
        own = scope.pending
        running, long = self.running, False
        if running is not None:
            step = _wall() - self.step_start
            if step > LONG_STEP_S:
                long = True
            else:
                weight += step
                if running is scope:
                    own += step
        if long and weight < total:
            return scope.cpu + own + (total - weight if running is scope else 0.0)
        return scope.cpu + (total * own / weight if weight > 0.0 else 0.0)

    def used(self, scope: RequestScope) -> float:
        """``scope``'s CPU seconds, with the step (or callback in its context) running now."""
        if self.solo is scope:
            return scope.cpu + _thread_time() - self.solo_since
        if self.reference:
            now = _thread_time()
            return scope.cpu + now - (self.step_start if self.running is scope else self.mark)
        if self.solo is None:
            self.settle()
        return scope.cpu

    def stepped(self, scope: RequestScope) -> None:
        """A step of ``scope`` ended (its start is ``step_start``)."""
        self.busy = True
        try:  # (no extra call per step: this runs after every metered step)
            self.running = None
            if self.solo is not None:  # its event ended in it, and one is left alone: its CPU
                return
            if self.reference:
                self.mark = now = _thread_time()
                scope.cpu += now - self.step_start
            else:
                step = _wall() - self.step_start
                if step > LONG_STEP_S:  # it may have blocked: charged the thread's CPU instead
                    self._settle(scope)
                else:
                    if scope.pending == 0.0:
                        self.touched.append(scope)
                    scope.pending += step
                    if scope.cpu + scope.pending <= self.limit:  # (wall: never below its CPU)
                        return
                    self._settle(None)
            if scope.cpu > self.limit and not scope.cpu_reported and not scope.ended:
                # Past its limit within a step that ended: the supervisor fails it (and
                # cancels its task) on this report, rather than when it next runs.
                scope.cpu_exceeded = scope.cpu_reported = True
                self.send(RequestError(scope.rid, "cpu", CPU_EXCEEDED_MESSAGE, ""))
        finally:
            self.busy = False

    def on_signal(self, signum: int, frame: Any) -> None:
        """SIGXCPU: interrupt the running request if it is over its limit, else report.

        Runs in the main thread between bytecodes, in the context of the running task. The
        scope keeps the interrupt: code that catches it still ends with the limit error.
        """
        scope = CURRENT.get(None)
        # Never raised into the meter's own code (it would leave the task without its
        # ``finally``: raised in ``Metered.send``, the exception is the task's, not its code's).
        ours = frame is not None and frame.f_globals is _MODULE
        if scope is not None and not self.busy and not ours:
            if scope.cpu_exceeded or self.peek(scope) > self.limit:
                scope.cpu_exceeded = True
                raise CpuLimitInterrupt()
        if not self._report_due and self._loop is not None:
            # Not written from here: the frame writer may be in the middle of a frame.
            self._report_due = True
            self._loop.call_soon_threadsafe(self._report)

    def _report(self) -> None:
        self._report_due = False
        if self.solo is None and not self.reference:
            self.settle()  # once for all of them (``used`` would settle per scope)
        now = _thread_time()
        usage = [
            [
                rid,
                round((e.scope.cpu + (now - self.solo_since if e.scope is self.solo else 0)) * 1e6),
            ]
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
        if self._scope.closed:  # its request is over and the task swallowed the cancellation
            return self._end()
        meter = self._meter
        if meter.solo is not None:  # one event live: it is charged everything (CpuMeter.enter)
            return self._coro.send(value)
        # step_start first: a SIGXCPU between the two must not time this step from an old start
        meter.step_start = _thread_time() if meter.reference else _wall()
        meter.running = self._scope
        try:
            return self._coro.send(value)
        finally:
            meter.stepped(self._scope)

    def __next__(self) -> Any:
        return self.send(None)

    def _end(self) -> Any:
        """The cancellation once more; swallowed again (the coroutine yields), the coroutine
        is closed and the task ends cancelled, so it never runs on after its request. The CPU
        of this step is charged to nobody: the clocks the meter charges from skip it."""
        meter = self._meter
        start = _thread_time()
        try:
            self._coro.throw(asyncio.CancelledError())
            try:
                self._coro.close()
            except RuntimeError:  # it ignored GeneratorExit too: it is never resumed anyway
                pass
            raise asyncio.CancelledError()
        finally:
            spent = _thread_time() - start
            if meter.solo is not None:
                meter.solo_since += spent
            elif meter.reference:
                meter.mark += spent
            else:
                meter.cpu_mark += spent

    def throw(self, *args: Any) -> Any:  # type: ignore[override]
        meter = self._meter
        if meter.solo is not None:
            return self._coro.throw(*args)
        meter.step_start = _thread_time() if meter.reference else _wall()
        meter.running = self._scope
        try:
            return self._coro.throw(*args)
        finally:
            meter.stepped(self._scope)

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
