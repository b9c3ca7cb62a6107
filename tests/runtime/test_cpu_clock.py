"""``CpuClock``: a held clock answers one reading per read of the socket, else reads each time."""

from __future__ import annotations

import os
import time

from ember.runtime.monitor import CpuClock, process_cpu_seconds


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_held_clock_shares_one_reading_and_a_released_one_reads_again() -> None:
    clock = CpuClock()
    assert clock.read() == 0.0 and clock.shared() == 0.0  # nothing watched yet
    clock.watch(os.getpid())
    before = process_cpu_seconds(os.getpid())
    clock.hold()
    first = clock.shared()
    _burn(0.02)
    assert clock.shared() == first  # the same reading while held
    assert before <= first < clock.read()  # (read() itself always reads)
    clock.release()
    after = clock.shared()
    assert after >= first + 0.015  # released: a fresh reading
    _burn(0.02)
    assert clock.shared() > after  # unheld: every call reads
    clock.hold()  # held again: a new reading, not the one of the last hold
    assert clock.shared() > after


def test_a_clock_of_a_process_that_is_gone_reads_zero() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    clock = CpuClock()
    clock.watch(pid)
    assert clock.read() == 0.0
