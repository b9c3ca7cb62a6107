"""Which request the running code belongs to, and its ``ctx`` (``waitUntil``).

Each request's handler runs in its own task with ``CURRENT`` set; tasks it creates (including
``waitUntil`` work) inherit it, so binding calls, console lines and CPU interrupts are attributed
to the right request. Outside any request (module import time) ``CURRENT`` is unset.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable
from typing import Any

CPU_EXCEEDED_MESSAGE = "Worker exceeded CPU time limit."
GLOBAL_SCOPE_MESSAGE = (
    "Disallowed operation called within global scope. Asynchronous I/O (ex: fetch() or "
    "connect()), setting a timeout, and generating random values are not allowed within global "
    "scope. To fix this error, perform this operation within a handler."
)


class CpuLimitInterrupt(BaseException):
    """Raised into a request's code when the supervisor says it used up its CPU time.

    A ``BaseException`` so that ``except Exception`` in user code does not swallow it; code
    that catches it anyway (``except BaseException``) still ends with the limit error, as on
    Cloudflare: the event's scope remembers the interrupt (``RequestScope.cpu_exceeded``).
    """


class Context:
    """``ctx``: the execution context of one event (``self.ctx`` in a WorkerEntrypoint)."""

    def __init__(self, scope: RequestScope) -> None:
        self._scope = scope
        self.props: dict[str, Any] = {}

    def wait_until(self, awaitable: Awaitable[Any]) -> None:
        """Keep the request alive until ``awaitable`` finishes (after the response is sent).
        Anything else is accepted and ignored: workerd's waitUntil takes a value that is not
        a promise as an already resolved one."""
        if not inspect.isawaitable(awaitable):
            return
        self._scope.add_background(awaitable)

    waitUntil = wait_until  # noqa: N815 - the JavaScript name

    def pass_through_on_exception(self) -> None:
        """Accepted for compatibility; ember has no origin to fall back to."""

    passThroughOnException = pass_through_on_exception  # noqa: N815


class RequestScope:
    """One event in flight inside the isolate.

    A plain class with slots, not a dataclass: one is built per request, and a dataclass's
    field factory and ``__post_init__`` cost more than the rest of building it.
    """

    __slots__ = (
        "rid",
        "channel",
        "background",
        "ctx",
        "cpu_exceeded",
        "cpu_reported",
        "cpu",
        "pending",
        "ended",
        "spawned",
        "closed",
    )

    def __init__(self, rid: int, channel: Any) -> None:
        self.rid = rid
        self.channel = channel  # the isolate's BindingChannel (binding calls, subrequests)
        self.background: list[asyncio.Task[Any]] = []
        self.ctx = Context(self)
        # Set when the CPU interrupt is raised into this event's code: the event ends with the
        # limit error even if that code catches the interrupt (``events.py`` checks it).
        self.cpu_exceeded = False
        self.cpu_reported = False  # the limit error was sent (once per event)
        self.cpu = 0.0  # thread CPU seconds of this event's task steps (cpumeter.py)
        self.pending = 0.0  # wall seconds of its steps not yet turned into CPU (cpumeter.py)
        self.ended = False  # its Done was sent
        # The unfinished tasks started in this scope (handler, body, waitUntil and stray work):
        # cancelled when the event is over, as workerd cancels an IoContext's outstanding tasks.
        # A dict for its order: ``close`` ends the newest first (see there).
        self.spawned: dict[asyncio.Task[Any], None] = {}
        self.closed = False  # its leftover tasks were cancelled: none of its code runs again

    def adopt(self, task: asyncio.Task[Any]) -> None:
        """``task`` was started in this scope (the loop's task factory, ``cpumeter.py``)."""
        if self.closed:  # started by a cancelled task's cleanup: the request is over
            task.cancel()
            return
        self.spawned[task] = None
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self.spawned.pop(task, None)

    def close(self) -> int:
        """The event is over (response sent, ``waitUntil`` work done): cancel what it left
        running. Only this scope's tasks: another request's work is never touched. Returns how
        many were still running (tasks started without ``waitUntil``)."""
        self.closed = True
        spawned, self.spawned = self.spawned, {}
        cancelled = 0
        # Newest first: each is unhooked now and steps in this order, so a TaskGroup's children
        # have ended before their parent wakes and aborts them (``child.cancel()`` on a child
        # still pointing at a shared future cancelled that future; review19).
        for task in reversed(spawned):
            cancelled += end_task(task)
        return cancelled

    def add_background(self, awaitable: Awaitable[Any]) -> None:
        """Schedule ``awaitable`` as waitUntil work of this request."""
        task = asyncio.ensure_future(awaitable)
        self.background.append(task)


def end_task(task: asyncio.Task[Any]) -> bool:
    """Cancel ``task`` alone; False if it was already done.

    ``task.cancel()`` cancels the future the task is waiting on, and that future may not be the
    task's own: a module-level future, or a task another request started and still awaits,
    which then ends cancelled for everybody awaiting it. workerd ends a request's code without
    touching a promise another request holds, so a waiting task is unhooked from its future and
    woken with the cancellation instead: it ends as if cancelled, its future runs on as it was.
    Code that answers a CancelledError by cancelling what it awaited still does so: Python
    3.11's ``asyncio.wait_for`` (3.12's awaits the future itself, and is unhooked from it).
    """
    if task.done():
        return False
    waiter = getattr(task, "_fut_waiter", None)  # asyncio's, C and Python tasks alike
    if waiter is None or waiter.done():  # about to step: cancel() touches no future then
        return task.cancel()
    for callback, context in getattr(waiter, "_callbacks", None) or ():
        if getattr(callback, "__self__", None) is task:  # the task's wakeup
            waiter.remove_done_callback(callback)
            woken = task.get_loop().create_future()
            woken.cancel()
            # The wakeup reads the cancelled future's CancelledError and throws it into the
            # coroutine at its await, as a cancelled waiter would.
            task.get_loop().call_soon(callback, woken, context=context)
            return True
    return task.cancel()  # not a future asyncio's task is waiting on as usual


CURRENT: contextvars.ContextVar[RequestScope] = contextvars.ContextVar("ember_request")


def current_scope() -> RequestScope:
    """The running request's scope; RuntimeError with the platform's message outside one."""
    scope = CURRENT.get(None)
    if scope is None:
        raise RuntimeError(GLOBAL_SCOPE_MESSAGE)
    return scope
