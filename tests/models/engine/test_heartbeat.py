"""The engine's heartbeat: a stall is work with no finished step for longer than the bound."""

from __future__ import annotations

import time

from ember.models.engine.heartbeat import Heartbeat


def test_an_idle_engine_is_never_stalled() -> None:
    heart = Heartbeat()
    assert heart.stall(1.0, now=time.monotonic() + 3600) is None
    heart.beat(waiting=1, running=0)
    heart.rest()
    assert heart.stall(1.0, now=time.monotonic() + 3600) is None


def test_work_without_a_beat_past_the_bound_is_a_stall_naming_the_work() -> None:
    heart = Heartbeat()
    heart.beat(waiting=2, running=1)
    start = time.monotonic()
    assert heart.stall(30.0, now=start + 29.0) is None  # a long step within the bound
    stall = heart.stall(30.0, now=start + 45.0)
    assert stall is not None and stall.waiting == 2 and stall.running == 1
    assert 44.0 <= stall.seconds <= 46.0
    assert stall.describe() == (
        "no engine step finished for 45 s while 1 request was running and 2 waiting"
    )
    heart.beat(waiting=0, running=3)  # a step finished: the clock starts again
    assert heart.stall(30.0, now=time.monotonic() + 29.0) is None
