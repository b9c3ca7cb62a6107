"""``FairWriter``: the KV store's one writer thread, serving its callers' writes owner by owner.

SQLite takes one writer at a time, and each of ember's KV writes ends in an fsync, so the writes
of every tenant of a supervisor share one line. First come first served, a worker doing
``KV.put`` in a loop put its whole backlog in front of every other account's write. Here each
owner (an account, or in ``ember dev`` a namespace) has its own FIFO queue, and the thread takes
one job from each owner with work in turn (round robin): another account's write waits for at
most one write of each busy owner, whatever their backlogs. One owner's writes still run in the
order they were asked for, and each job's future resolves only after the job returned, i.e.
after its transaction committed.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class _Job:
    fn: Callable[[], Any]
    future: Future[Any]


class FairWriter:
    """One thread, one queue per owner, owners served in turn. Thread-safe."""

    def __init__(self, thread_name: str = "ember-kv-write") -> None:
        self._thread_name = thread_name
        self._queues: dict[str, deque[_Job]] = {}
        self._turns: deque[str] = deque()  # owners with queued jobs, in the order served
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, owner: str, fn: Callable[[], Any]) -> Future[Any]:
        """Queue ``fn`` behind ``owner``'s earlier jobs; its future has its result or error."""
        job = _Job(fn, Future())
        with self._cond:
            if self._closed:
                raise RuntimeError("the KV store is closed")
            queue = self._queues.get(owner)
            if queue is None:
                queue = self._queues[owner] = deque()
                self._turns.append(owner)
            queue.append(job)
            if self._thread is None:  # started on first use: many stores are never written
                self._thread = threading.Thread(
                    target=self._serve, name=self._thread_name, daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return job.future

    def pending(self) -> int:
        """Jobs queued and not yet started (for tests and diagnostics)."""
        with self._cond:
            return sum(len(q) for q in self._queues.values())

    def shutdown(self) -> None:
        """Run every queued job, then stop the thread; later ``submit`` calls raise."""
        with self._cond:
            self._closed = True
            thread = self._thread
            self._cond.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _next(self) -> _Job | None:
        """The next owner's first job (the owner goes to the back of the line if it has more);
        None once closed and drained. The caller holds ``_cond``."""
        while not self._turns:
            if self._closed:
                return None
            self._cond.wait()
        owner = self._turns.popleft()
        queue = self._queues[owner]
        job = queue.popleft()
        if queue:
            self._turns.append(owner)
        else:
            del self._queues[owner]
        return job

    def _serve(self) -> None:
        while True:
            with self._cond:
                job = self._next()
            if job is None:
                return
            if not job.future.set_running_or_notify_cancel():
                continue
            try:
                result = job.fn()
            except BaseException as exc:  # the caller's error, delivered to the caller
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
