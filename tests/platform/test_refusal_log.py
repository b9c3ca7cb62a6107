"""``RefusalLog`` with a clock seam: a key's burst per interval, one summary per interval when
it is over (at the key's next line or a flush), and every key summed up as the platform stops."""

from __future__ import annotations

import re

from ember.runtime.platform.refusal_log import RefusalLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _summaries(lines: list[str]) -> list[tuple[str, str, str]]:
    found = []
    for line in lines:
        match = re.search(
            r"AI refusals (\S+): (\S+) more lines not logged in the last (\d+) s", line
        )
        if match:
            found.append(match.groups())
    return found


def test_a_burst_per_interval_then_one_summary() -> None:
    lines: list[str] = []
    clock = Clock()
    log = RefusalLog(lines.append, {"a1": "alpha"}.get, burst=3, interval_s=60, clock=clock)
    for index in range(10):
        log.line("a1", f"refused {index}")
    log.line("b2", "other account")
    log.line("client 10.0.0.1", "unauthenticated")
    assert lines == ["refused 0", "refused 1", "refused 2", "other account", "unauthenticated"]
    clock.now += 59
    log.flush()
    assert _summaries(lines) == []  # the interval is not over
    clock.now += 1
    log.line("a1", "refused 10")  # a new interval: its own burst, after the last one's sum
    assert lines[-1] == "refused 10"
    assert _summaries(lines) == [("account=alpha", "7", "60")]
    for index in range(11, 16):
        log.line("a1", f"refused {index}")
    clock.now += 90
    log.flush()  # the housekeeping: the interval is over, nobody wrote since
    assert _summaries(lines)[-1] == ("account=alpha", "3", "60")
    log.line("client 10.0.0.1", "again")
    for _ in range(4):
        log.line("client 10.0.0.1", "again")
    log.flush(everything=True)  # the platform stops: what is left is summed up at once
    assert lines[-1].endswith("in the last 0 s (ember_ai_requests_total counts every call)")
    assert "AI refusals client 10.0.0.1: 2 more lines not logged" in lines[-1]


def test_thousands_are_grouped_and_keys_stay_bounded() -> None:
    lines: list[str] = []
    log = RefusalLog(lines.append, burst=1, interval_s=60, clock=Clock())
    for _ in range(1501):
        log.line("k", "x")
    log.flush(everything=True)
    assert "AI refusals account=k: 1,500 more lines not logged" in lines[-1]
