"""The control plane's notion of now: a typed seam so tests can move time past an expiry."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], float]


def system_clock() -> float:
    return time.time()


class ManualClock:
    """A clock that moves only when told to (tests of expiry and GC)."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
