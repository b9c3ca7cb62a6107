"""The polling pace of a busy isolate: slower only while it waits, memory read only after it ran."""

from __future__ import annotations

import random

from ember.runtime.pace import QUIET_CPU_S, QUIET_POLL_INTERVAL_S, RSS_CPU_S, PollPace


def test_a_running_isolate_keeps_the_base_pace_and_a_waiting_one_slows_down() -> None:
    pace = PollPace(0.01)
    cpu = 0.0
    for _ in range(5):
        cpu += 0.005  # runs: every poll at the base pace
        assert pace.after(cpu) == 0.01
    delays = [pace.after(cpu) for _ in range(5)]  # waits: doubling up to the quiet pace
    assert delays == [0.02, 0.04, QUIET_POLL_INTERVAL_S, QUIET_POLL_INTERVAL_S, 0.04]
    assert pace.after(cpu + QUIET_CPU_S) == 0.01  # runs again: back at once


def test_memory_is_read_whenever_the_isolate_ran_since_the_last_read() -> None:
    rng = random.Random()
    pace = PollPace(0.01)
    cpu, last_read = 0.0, None
    for _ in range(200):
        cpu += rng.choice([0.0, 0.0, RSS_CPU_S / 3, RSS_CPU_S, 0.01])
        due = pace.memory_due(cpu)
        # The reference rule: read on the first poll and once RSS_CPU_S ran since the last read.
        assert due == (last_read is None or cpu - last_read >= RSS_CPU_S)
        if due:
            last_read = cpu
