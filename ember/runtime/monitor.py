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
