"""An isolate's console output has a budget (``Limits.console_chars_per_s``, ``ember serve``'s
256,000 characters a second): past it lines are dropped before a frame is built, one warn line
says how many, and the supervisor holds a worker that writes its own frames to a wider budget.
Without a budget (``ember dev``) every line arrives as before."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

from ember.runtime.console_gate import BACKSTOP, MIN_LINE_CHARS, ConsoleGate
from ember.runtime.events import ConsoleEvent, InvocationEvent
from tests.runtime.harness import Harness, write_project

BUDGET = 256_000
LINES = 20_000
FLOOD = f"""\
import sys
from workers import Response


async def on_fetch(request, env):
    for _ in range({LINES}):
        print("x" * 99, file=sys.stderr)
    return Response("printed")
"""
# A worker past its console: it sends Log frames on the isolate's socket itself.
OWN_FRAMES = f"""\
import sys
from ember.runtime.protocol import Log
from workers import Response


async def on_fetch(request, env):
    send = sys.stdout._out._send
    for _ in range({LINES * 5}):
        send(Log(0, "log", "y" * 99))
    return Response("sent")
"""
NOTICE = re.compile(
    r"\[ember\] ([\d,]+) console lines \(([\d,]+) characters\) dropped: an isolate sends at "
    rf"most {BUDGET:,} characters of console output a second \(each line counts as at least "
    rf"{MIN_LINE_CHARS}\)"
)


def _dropped(events: list[ConsoleEvent]) -> tuple[int, int]:
    """Lines and characters the notices among ``events`` say were dropped."""
    lines = chars = 0
    for event in events:
        found = NOTICE.fullmatch(event.message)
        if found:
            assert event.level == "warn"
            lines += int(found[1].replace(",", ""))
            chars += int(found[2].replace(",", ""))
    return lines, chars


def test_without_a_budget_every_line_arrives(harness: Harness, tmp_path: Path) -> None:
    flood = harness.deploy(write_project(tmp_path / "devflood", FLOOD))
    with harness.client(flood) as client:
        assert client.get("/").text == "printed"
    harness.wait_for(lambda: len(harness.console(flood)) >= LINES)
    assert harness.console(flood) == ["x" * 99] * LINES


def test_past_the_budget_lines_are_dropped_and_counted(harness: Harness, tmp_path: Path) -> None:
    project = write_project(tmp_path / "flood", FLOOD)
    flood = harness.deploy(project, limits={"console_chars_per_s": BUDGET})
    harness.supervisor.tracing = lambda deployment_id: deployment_id == flood
    try:
        with harness.client(flood) as client:
            assert client.get("/").text == "printed"
        harness.wait_for(lambda: len(harness.of_type(InvocationEvent, flood)) == 1)
    finally:
        harness.supervisor.tracing = None
    events = harness.of_type(ConsoleEvent, flood)
    kept = [e for e in events if e.message == "x" * 99]
    lines, chars = _dropped(events)
    assert len(kept) + lines == LINES and chars == lines * 99, (len(kept), lines)
    # The printing took under a second here, or a few windows on a slow machine (one notice
    # each, at most): never more than each window's budget came through.
    windows = sum(1 for e in events if NOTICE.fullmatch(e.message))
    assert 0 < len(kept) * 99 <= BUDGET * windows, (len(kept), windows)
    assert events[-1].level == "warn" and NOTICE.fullmatch(events[-1].message)
    (invocation,) = harness.of_type(InvocationEvent, flood)
    assert invocation.truncated is True
    assert invocation.logs[-1][:2] == ("warn", events[-1].message)  # told in its own log


def test_a_worker_writing_its_own_frames_is_held_by_the_supervisor(
    harness: Harness, tmp_path: Path
) -> None:
    project = write_project(tmp_path / "ownframes", OWN_FRAMES)
    hostile = harness.deploy(project, limits={"console_chars_per_s": BUDGET})
    started = time.monotonic()
    with harness.client(hostile, timeout=120) as client:
        assert client.get("/").text == "sent"
    elapsed = time.monotonic() - started
    # The supervisor told the request's end (after every frame it sent) what it dropped.
    events = harness.of_type(ConsoleEvent, hostile)
    kept = sum(1 for e in events if e.message == "y" * 99)
    lines, chars = _dropped(events)
    assert kept + lines == LINES * 5 and chars == lines * 99, (kept, lines)
    # A one-second window that dropped nothing sends no notice, so on a slow machine the flood
    # spans more windows than notices: the windows it can have kept lines in are bounded by
    # the seconds it lasted (a rate bound, not a timing assertion).
    windows = max(len(events) - kept, math.ceil(elapsed) + 1)
    assert 0 < kept * 99 <= BACKSTOP * BUDGET * windows, (kept, windows)
    assert lines > LINES, lines


def test_the_gate_counts_a_window_of_characters() -> None:
    now = [0.0]
    gate = ConsoleGate(1_000, clock=lambda: now[0])
    assert [gate.admit(1, 300) for _ in range(4)] == [True, True, True, False]
    assert gate.admit(1, 10) is True  # 100 left: a short line still counts 64
    assert gate.admit(2, 10) is False  # 36 left
    assert gate.take(1) == [(1, 1, 300)] and gate.take() == [(2, 1, 10)] and not gate.tally
    now[0] = 1.0  # a new window
    assert gate.admit(0, 1_000) is True and gate.admit(0, 0) is False
    assert gate.take() == [(0, 1, 0)]
    assert BACKSTOP > 1
