"""Reading another process's CPU time, memory and parent from outside (no cooperation needed).

CPU: ``clock_gettime`` on the process's CPU clock (all its threads; ~1 µs, isolation.md §3).
Memory: resident set size from ``/proc/<pid>/statm``.
"""

from __future__ import annotations

import os
import time

_PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_clock_id(pid: int) -> int:
    """Linux's clock id for ``pid``'s process CPU clock (MAKE_PROCESS_CPUCLOCK, CPUCLOCK_SCHED)."""
    return ((~pid) << 3) | 2


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds used by every thread of ``pid``; OSError if it no longer exists."""
    return time.clock_gettime(cpu_clock_id(pid))


def process_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` in bytes; OSError if it no longer exists."""
    fd = os.open(f"/proc/{pid}/statm", os.O_RDONLY)
    try:
        data = os.read(fd, 256)
    finally:
        os.close(fd)
    return int(data.split()[1]) * _PAGE


def process_parent(pid: int) -> int:
    """The parent pid of ``pid`` (0 if it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return 0
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else 0


class CpuClock:
    """One process's CPU seconds (0.0 before ``watch`` or once it is gone).

    ``shared`` reads it once between ``hold`` and ``release``: the supervisor holds it for one
    read of the isolate's socket, whose ten or so Response frames under load end their requests
    microseconds apart; each reading is a syscall that may take the running isolate's runqueue
    lock. Only a finished request's charge uses it; limits are checked from their own readings.
    """

    __slots__ = ("_clock", "_held")

    def __init__(self) -> None:
        self._clock: int | None = None
        self._held: float | None = None  # -1.0: held, not read yet

    def watch(self, pid: int) -> None:
        """Read ``pid``'s clock from now on."""
        self._clock = cpu_clock_id(pid)

    def read(self) -> float:
        """CPU seconds now (a syscall)."""
        if self._clock is None:
            return 0.0
        try:
            return time.clock_gettime(self._clock)
        except OSError:
            return 0.0

    def hold(self) -> None:
        """From now until ``release``, ``shared`` returns one reading."""
        self._held = -1.0

    def release(self) -> None:
        self._held = None

    def shared(self) -> float:
        """``read()``, or the reading taken since ``hold`` (the first call takes it)."""
        held = self._held
        if held is None:
            return self.read()
        if held < 0:
            held = self._held = self.read()
        return held
