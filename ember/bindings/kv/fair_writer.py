"""``FairWriter``: the KV store's one writer thread, sharing its time among its callers' owners
by the bytes it writes for them.

SQLite takes one writer at a time, and each of ember's KV writes ends in an fsync, so the writes
of every tenant of a supervisor share one line. First come first served, a worker doing
``KV.put`` in a loop put its whole backlog in front of every other account's write; served in
turn one write each, an account sending 24 MB values still took the writer a second per write
while another's 100-byte put waited behind two of them (the one being committed, and the next,
queued before the small one arrived). Here each owner (an account, or in ``ember dev`` a
namespace) has its own FIFO queue, and the thread shares its time by bytes (start-time fair
queueing, the byte-counting cousin of deficit round robin):

- every job costs its ``size`` plus ``WRITE_COST`` (its transaction and flush, what a write of
  nothing still costs);
- a job gets a start tag when it is queued: its owner's previous job's finish tag, or the
  writer's virtual time (the start tag of the job it took last) if that is later, so an owner
  that was idle banks no credit; its finish tag is its start plus its cost;
- the thread takes the queued job with the lowest start tag (the earlier queued on a tie).

So an owner that just had 24 MB written waits until the others have had as many bytes (or their
queues ran dry): another account's small write waits for the write being committed and, at most,
one write of each busy owner that has had no more bytes than it, never for a flooder's backlog.
One owner's writes still run in the order they were asked for, and each job's future resolves
only after the job returned, i.e. after its transaction committed.

Group commit (``GroupCommit``): a job may carry an ``item``, a write the store can commit with
others (``write_group.py``). When the thread turns to such a job it also takes the jobs that
would have run next, in the same order, while they carry items too, up to ``max_jobs`` jobs and
``max_bytes`` of their sizes (the first is taken whatever its size: a 25 MiB value commits with
nothing else, so a small write never waits in a large value's transaction), and commits them in
one transaction: one flush where there were as many. Each job's future still resolves only after
that commit, with its own outcome. A job without an item (namespaces, housekeeping) ends a group
and runs on its own. Without ``GroupCommit`` (the reference) every job runs on its own, in the
same order.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

# A group's bounds: enough to share one flush among every busy account's next writes, small
# enough that the last in a group waits for little more than the flush.
GROUP_JOBS = 64
GROUP_BYTES = 1024 * 1024
# What a job costs beside its bytes: a transaction and an fsync cost about as much as writing
# this many bytes more, so a flood of empty writes is not free.
WRITE_COST = 64 * 1024
# Finish tags of owners with nothing queued are kept (an owner ahead of the others must not
# shed its debt by pausing) and swept, once there are this many, of those no longer ahead.
IDLE_OWNERS_KEPT = 1024


@dataclass(frozen=True, slots=True)
class GroupCommit:
    """How the writer commits queued items together: ``run(items)`` applies them in order in
    one transaction and returns each one's outcome (None, or the error that refused it), or
    raises when nothing was committed (then each job runs on its own)."""

    run: Callable[[Sequence[Any]], Sequence[BaseException | None]]
    max_jobs: int = GROUP_JOBS
    max_bytes: int = GROUP_BYTES


@dataclass(slots=True)
class _Job:
    fn: Callable[[], Any]
    future: Future[Any]
    item: object | None = None  # what ``GroupCommit.run`` takes in place of ``fn``
    size: int = 0
    start: int = 0  # the virtual time it may start at (bytes, see the module's doc)
    seq: int = 0  # when it was queued, among all owners: breaks ties of ``start``


class FairWriter:
    """One thread, one queue per owner, owners served by bytes. Thread-safe."""

    def __init__(
        self, thread_name: str = "ember-kv-write", group: GroupCommit | None = None
    ) -> None:
        self._thread_name = thread_name
        self._group = group
        self._queues: dict[str, deque[_Job]] = {}
        # One entry per owner with queued jobs: its first job's (start, seq, owner).
        self._heads: list[tuple[int, int, str]] = []
        self._finish: dict[str, int] = {}  # each owner's last queued job's finish tag
        self._now = 0  # virtual time: the start tag of the job taken last
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(
        self, owner: str, fn: Callable[[], Any], item: object | None = None, size: int = 0
    ) -> Future[Any]:
        """Queue ``fn`` behind ``owner``'s earlier jobs; its future has its result or error.
        ``item``: the same job as ``GroupCommit.run`` takes it (``size`` bytes), to commit
        with others; ``fn`` runs it alone."""
        job = _Job(fn, Future(), item, size)
        with self._cond:
            if self._closed:
                raise RuntimeError("the KV store is closed")
            job.start = max(self._now, self._finish.get(owner, 0))
            job.seq = next(self._seq)
            self._finish[owner] = job.start + size + WRITE_COST
            queue = self._queues.get(owner)
            if queue is None:
                queue = self._queues[owner] = deque()
                heapq.heappush(self._heads, (job.start, job.seq, owner))
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
        """The queued job with the lowest start tag; None once closed and drained. The caller
        holds ``_cond``."""
        while not self._heads:
            if self._closed:
                return None
            self._cond.wait()
        return self._pop()

    def _pop(self) -> _Job:
        """The first job of the owner whose head starts first (there is one), which sets the
        virtual time; the caller holds ``_cond``."""
        _, _, owner = heapq.heappop(self._heads)
        queue = self._queues[owner]
        job = queue.popleft()
        self._now = job.start  # never goes back: every queued tag is at least the last taken
        if queue:
            heapq.heappush(self._heads, (queue[0].start, queue[0].seq, owner))
        else:
            del self._queues[owner]
            if len(self._finish) > IDLE_OWNERS_KEPT:
                self._sweep()
        return job

    def _sweep(self) -> None:
        """Forget the idle owners that are not ahead of the virtual time: a job of theirs
        would start at it anyway."""
        for owner in [o for o, tag in self._finish.items() if tag <= self._now]:
            if owner not in self._queues:
                del self._finish[owner]

    def _peek(self) -> _Job:
        """The job ``_pop`` would return next (there is one)."""
        return self._queues[self._heads[0][2]][0]

    def _take(self) -> list[_Job]:
        """The next job and, if it can be grouped, the groupable jobs that would run after it
        (in order, within the group's bounds); empty once closed and drained. The caller holds
        ``_cond``."""
        first = self._next()
        if first is None:
            return []
        group = [first]
        bounds = self._group
        if bounds is None or first.item is None:
            return group
        size = first.size
        while self._heads and len(group) < bounds.max_jobs:
            head = self._peek()
            if head.item is None or size + head.size > bounds.max_bytes:
                break
            group.append(self._pop())
            size += head.size
        return group

    def _serve(self) -> None:
        while True:
            with self._cond:
                taken = self._take()
            if not taken:
                return
            jobs = [job for job in taken if job.future.set_running_or_notify_cancel()]
            if len(jobs) == 1 or self._group is None:
                for job in jobs:
                    _run(job)
            elif jobs:
                self._run_group(self._group, jobs)

    def _run_group(self, group: GroupCommit, jobs: list[_Job]) -> None:
        try:
            outcomes = group.run([job.item for job in jobs])
        except BaseException:  # nothing committed (a full disk, say): each alone, its own error
            for job in jobs:
                _run(job)
            return
        for job, outcome in zip(jobs, outcomes, strict=True):
            if outcome is None:
                job.future.set_result(None)
            else:
                job.future.set_exception(outcome)


def _run(job: _Job) -> None:
    try:
        result = job.fn()
    except BaseException as exc:  # the caller's error, delivered to the caller
        job.future.set_exception(exc)
    else:
        job.future.set_result(result)
