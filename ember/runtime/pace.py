"""How often the supervisor polls an isolate with requests in flight, and when it reads its memory.

The limits are enforced by polling (``process.py``). Polling a busy isolate every 10 ms costs
the supervisor a timer, a CPU-clock read and a ``/proc`` read each time, which is most of what
a handler streaming a model's answer costs it (the isolate itself only waits). Two things make
the waiting case cheap without loosening the limits for an isolate that runs:

- the pace: an isolate that used almost no CPU since the last poll is waiting (on a model, a
  subrequest); its next poll may come later, doubling up to ``QUIET_POLL_INTERVAL_S``. Any CPU
  use brings the base pace back at the next poll, so a loop or an allocation is seen as soon as
  before plus at most that interval.
- memory: resident memory only grows while the process runs (its page faults are its own CPU
  time), so ``/proc/<pid>/statm`` is read again only once the isolate ran ``RSS_CPU_S`` since.
"""

from __future__ import annotations

QUIET_POLL_INTERVAL_S = 0.04
QUIET_CPU_S = 0.001  # less CPU than this between two polls: the isolate is waiting
RSS_CPU_S = 0.0005  # CPU an isolate may use before its memory is read again


class PollPace:
    """The polling pace of one isolate."""

    def __init__(self, base: float) -> None:
        self.base = base
        self.delay = base
        self._cpu = 0.0
        self._rss_cpu = float("-inf")

    def after(self, cpu: float) -> float:
        """The delay until the next poll of a busy isolate whose CPU clock reads ``cpu``."""
        ran, self._cpu = cpu - self._cpu, cpu
        if ran >= QUIET_CPU_S:
            self.delay = self.base
        else:
            self.delay = min(self.delay * 2, max(self.base, QUIET_POLL_INTERVAL_S))
        return self.delay

    def memory_due(self, cpu: float) -> bool:
        """True if the isolate ran since its memory was last read (then it is read now)."""
        if cpu - self._rss_cpu < RSS_CPU_S:
            return False
        self._rss_cpu = cpu
        return True
