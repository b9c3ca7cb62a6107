"""A lock that threads take in the order they asked for it.

``threading.Lock`` promises no order: under a steady stream of compile jobs one intake thread
could lose every race until its ``queue_seconds`` ran out and its request got a 503, while
requests that came later were served. Here each waiter parks on a lock of its own in a queue,
and ``release`` hands the lock straight to the first of them (it is never free in between, so
nobody can cut in).
"""

from __future__ import annotations

import threading
from collections import deque


class FifoLock:
    """``acquire(timeout)`` / ``release()``, first come first served."""

    def __init__(self) -> None:
        self._guard = threading.Lock()  # held only for a few lines, never while waiting
        self._held = False
        self._waiters: deque[threading.Lock] = deque()

    @property
    def waiting(self) -> int:
        """Threads parked for their turn now."""
        with self._guard:
            return len(self._waiters)

    def acquire(self, timeout: float | None = None) -> bool:
        """Take the lock within ``timeout`` seconds (None: however long it takes); False if the
        turn did not come in time."""
        with self._guard:
            if not self._held:
                self._held = True
                return True
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        if turn.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            return True
        with self._guard:
            try:
                self._waiters.remove(turn)
            except ValueError:
                # ``release`` handed us the lock between our timeout and now: it is ours.
                return True
            return False

    def release(self) -> None:
        with self._guard:
            if not self._held:
                raise RuntimeError("release of a FifoLock that is not held")
            if self._waiters:
                self._waiters.popleft().release()  # still held: passed to the next in line
            else:
                self._held = False

    def __enter__(self) -> FifoLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
