"""Whether the engine loop is making progress: when it last finished a step while it had work.

A wedged step (a deadlock, a GPU kernel that never returns) leaves the engine thread alive, so
"the thread is running" says nothing; what a stuck engine stops doing is finishing steps while
requests wait or run. The engine thread records that here (``rest`` when it has nothing to do,
``beat`` when work arrives from idle and after every step); any thread asks ``stall`` whether
the last beat is older than a bound, as SGLang's ``/health_generate`` fails when the scheduler
sent nothing for ``SGLANG_HEALTH_CHECK_TIMEOUT`` seconds. An idle engine never stalls.

Each record is one immutable ``Beat`` swapped in by one attribute assignment, so a reader in
another thread sees a whole beat or the one before, without a lock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Beat:
    at: float  # time.monotonic(): a step finished, or work arrived at an idle engine
    waiting: int  # requests waiting for their (first or next) prefill then
    running: int  # requests being decoded then


@dataclass(frozen=True, slots=True)
class Stall:
    """The engine has work and finished no step for ``seconds``."""

    seconds: float
    waiting: int
    running: int

    def describe(self) -> str:
        return (
            f"no engine step finished for {self.seconds:.0f} s while "
            f"{self.running} {_requests(self.running)} running and {self.waiting} waiting"
        )


def _requests(count: int) -> str:
    return "request was" if count == 1 else "requests were"


class Heartbeat:
    """Written by the engine thread only; ``stall`` may be called from any thread."""

    def __init__(self) -> None:
        self._beat: Beat | None = None  # None: idle (nothing waits or runs)

    def rest(self) -> None:
        """The engine has nothing to do: it cannot be stalled."""
        self._beat = None

    def beat(self, waiting: int, running: int) -> None:
        """Progress now: a step finished (or work just arrived), with this work left."""
        self._beat = Beat(time.monotonic(), waiting, running)

    def stall(self, bound_s: float, now: float | None = None) -> Stall | None:
        """The stall, when the engine has work and its last beat is more than ``bound_s`` old."""
        beat = self._beat
        if beat is None:
            return None
        seconds = (time.monotonic() if now is None else now) - beat.at
        if seconds <= bound_s:
            return None
        return Stall(seconds, beat.waiting, beat.running)
