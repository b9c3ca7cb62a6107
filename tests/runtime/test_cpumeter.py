"""The isolate's CPU meter: stretches where one event is live go unmetered (the event is charged
the thread's CPU from when it became the only one) and several live events' steps are timed by
the wall clock with the CPU split in proportion; both must give the figures the reference (a
meter that times every step with the thread's CPU clock) gives on the same work: fresh random
spins, in random orders of events arriving and leaving."""

from __future__ import annotations

import asyncio
import gc
import random
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from ember.runtime.isolate import cpumeter
from ember.runtime.isolate.cpumeter import CpuMeter, Metered
from ember.runtime.isolate.scope import CURRENT, CpuLimitInterrupt, RequestScope
from ember.runtime.protocol import RequestError


@pytest.fixture(autouse=True)
def _no_gc_passes() -> Iterator[None]:
    """A garbage-collector pass (of what earlier tests in this process left) runs inside some
    step and is that step's CPU in either mode: milliseconds, which the bounds here are not
    about (seen with the integration tests run first in one process)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _Event:
    def __init__(self, scope: RequestScope) -> None:
        self.scope = scope


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def _events(meter: CpuMeter, plan: list[list[float]], gaps: list[float]) -> dict[int, float]:
    """Run one event per ``plan`` entry (its steps' spins), event ``i`` starting after
    ``gaps[i]`` s; each spins, yields, spins ... and ends. Returns each event's figure."""
    live: dict[int, _Event] = {}
    meter.live = live
    loop = asyncio.get_running_loop()
    figures: dict[int, float] = {}

    async def run(rid: int, spins: list[float]) -> None:
        scope = live[rid].scope
        CURRENT.set(scope)
        for spin in spins:
            _spin(spin)
            await asyncio.sleep(0)
        del live[rid]
        meter.leave()
        figures[rid] = meter.used(scope)

    tasks = []
    for rid, (spins, gap) in enumerate(zip(plan, gaps, strict=True), start=1):
        await asyncio.sleep(gap)
        live[rid] = _Event(RequestScope(rid, None))
        meter.enter()
        tasks.append(loop.create_task(Metered(run(rid, spins), live[rid].scope, meter)))
    await asyncio.gather(*tasks)
    return figures


@pytest.mark.parametrize("seed", range(6))
def test_unmetered_solo_stretches_match_metering_every_step(seed: int) -> None:
    rng = random.Random(seed)
    events = rng.randint(1, 4)
    plan = [[rng.uniform(0.001, 0.006) for _ in range(rng.randint(1, 6))] for _ in range(events)]
    gaps = [0.0] + [rng.choice([0.0, 0.002, 0.03]) for _ in range(events - 1)]
    spent = time.thread_time()
    fast = asyncio.run(_events(CpuMeter(1e9, lambda m: None), plan, gaps))
    spent = time.thread_time() - spent
    slow = asyncio.run(_events(CpuMeter(1e9, lambda m: None, reference=True), plan, gaps))
    for rid, spins in enumerate(plan, start=1):
        own = sum(spins)
        # The reference: at least the spins its own code ran, plus only asyncio's and the
        # meter's work around them (well under a millisecond here), never another's spins.
        assert own <= slow[rid] < own + 0.002, (rid, own, slow[rid])
        # The fast path splits by wall time, which a preempted step inflates (the suite runs
        # two workers on two cores): close to its own spins, never near another's on top.
        assert 0.6 * own < fast[rid] < 1.4 * own + 0.002, (rid, own, fast[rid])
    # Nothing counted twice: the figures together are at most the thread's CPU for the run.
    assert sum(fast.values()) <= spent


def _blocking_plan(rng: random.Random) -> tuple[list[list[tuple[float, float]]], list[float]]:
    """Events whose steps spin (CPU) and sleep (the thread blocked, as in a sync HTTP call or
    ``time.sleep``): a list of (spin, sleep) per step; the first event mostly blocks."""
    events = rng.randint(2, 4)
    plan = [[(rng.uniform(0.0, 0.0005), rng.uniform(0.003, 0.012)) for _ in range(4)]]
    for _ in range(events - 1):
        plan.append([(rng.uniform(0.001, 0.005), 0.0) for _ in range(rng.randint(2, 6))])
    gaps = [0.0] + [rng.choice([0.0, 0.002]) for _ in range(events - 1)]
    return plan, gaps


async def _blocking_events(
    meter: CpuMeter, plan: list[list[tuple[float, float]]], gaps: list[float]
) -> dict[int, float]:
    live: dict[int, _Event] = {}
    meter.live = live
    loop = asyncio.get_running_loop()
    figures: dict[int, float] = {}

    async def run(rid: int, steps: list[tuple[float, float]]) -> None:
        scope = live[rid].scope
        CURRENT.set(scope)
        for spin, block in steps:
            _spin(spin)
            time.sleep(block)
            await asyncio.sleep(0)
        del live[rid]
        meter.leave()
        figures[rid] = meter.used(scope)

    tasks = []
    for rid, (steps, gap) in enumerate(zip(plan, gaps, strict=True), start=1):
        await asyncio.sleep(gap)
        live[rid] = _Event(RequestScope(rid, None))
        meter.enter()
        tasks.append(loop.create_task(Metered(run(rid, steps), live[rid].scope, meter)))
    await asyncio.gather(*tasks)
    return figures


@pytest.mark.parametrize("seed", range(4))
def test_a_step_that_blocks_is_charged_its_own_cpu_not_its_wall_time(seed: int) -> None:
    # The wall-time split assumed steps never block; one that sleeps (ember's sync HTTP,
    # time.sleep, sync file I/O) took most of its neighbours' CPU. Fast path and reference.
    rng = random.Random(100 + seed)
    plan, gaps = _blocking_plan(rng)
    slow = asyncio.run(_blocking_events(CpuMeter(1e9, lambda m: None, reference=True), plan, gaps))
    owns = {rid: sum(spin for spin, _ in steps) for rid, steps in enumerate(plan, start=1)}
    for rid, own in owns.items():
        assert own <= slow[rid] < own + 0.002, (rid, own, slow[rid])

    # The fast path splits the thread's CPU by each step's wall time: a step preempted by
    # another process (a loaded CI box) looks longer than its CPU, and one such run in a few
    # hundred fell outside the bounds (seed 3). Three tries: a split that is wrong by design
    # fails all three; one spoiled by the scheduler does not.
    def off(fast: dict[int, float]) -> list[tuple[int, float, float]]:
        return [
            (rid, own, fast[rid])
            for rid, own in owns.items()
            if not 0.6 * own <= fast[rid] < 1.4 * own + 0.002
        ]

    tries = [off(asyncio.run(_blocking_events(CpuMeter(1e9, lambda m: None), plan, gaps)))]
    while tries[-1] and len(tries) < 3:
        tries.append(off(asyncio.run(_blocking_events(CpuMeter(1e9, lambda m: None), plan, gaps))))
    assert not tries[-1], (tries, plan)


class _Sent(list[Any]):
    def __call__(self, message: Any) -> None:
        self.append(message)


def test_sigxcpu_landing_inside_the_meters_bookkeeping_leaves_it_consistent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SIGXCPU's handler runs between any two bytecodes, meter code included: landing in
    # ``stepped`` between its ``touched`` append and its ``pending`` update, a handler that
    # settled left the scope's pending outside ``touched`` for good, its CPU split onto its
    # neighbours (one of which was then failed for it).
    sent = _Sent()
    meter = CpuMeter(0.05, sent)
    loop = asyncio.new_event_loop()
    meter._loop = loop
    a, b = RequestScope(1, None), RequestScope(2, None)
    meter.live = live = {1: _Event(a)}
    meter.enter()
    live[2] = _Event(b)
    meter.enter()
    real_wall = cpumeter._wall
    fire = [False]

    def wall() -> float:
        value = real_wall()
        if fire[0]:  # the signal lands at this point of ``stepped``, in A's context
            fire[0] = False
            token = CURRENT.set(a)
            try:
                meter.on_signal(0, None)
            finally:
                CURRENT.reset(token)
        return value

    monkeypatch.setattr(cpumeter, "_wall", wall)

    def step(scope: RequestScope, seconds: float, signal: bool = False) -> None:
        meter.step_start = cpumeter._wall()
        meter.running = scope
        _spin(seconds)
        fire[0] = signal
        meter.stepped(scope)

    step(b, 0.002)
    step(a, 0.002, signal=True)
    for _ in range(10):  # A spins 10 x 4 ms, B 10 x 0.5 ms: both under the 50 ms limit
        step(a, 0.004)
        step(b, 0.0005)
    meter.settle()
    loop.close()
    assert 0.6 * 0.042 < a.cpu < 1.4 * 0.042 + 0.002, (a.cpu, b.cpu)
    assert b.cpu < 1.4 * 0.007 + 0.002, (a.cpu, b.cpu)
    assert not [m for m in sent if isinstance(m, RequestError)], sent


def test_sigxcpu_raises_into_request_code_but_never_into_the_meters_own() -> None:
    # Raised in ``Metered.send`` or ``stepped``, the interrupt would be the task's exception
    # rather than its code's: the event's ``finally`` (its Done) would never run.
    loop = asyncio.new_event_loop()
    meter = CpuMeter(0.01, lambda m: None)
    meter._loop = loop
    scope = RequestScope(1, None)
    scope.cpu = 0.02  # over its limit
    meter.live = {1: _Event(scope), 2: _Event(RequestScope(2, None))}
    token = CURRENT.set(scope)
    try:
        meter.on_signal(0, SimpleNamespace(f_globals=vars(cpumeter)))
        assert meter._report_due and not scope.cpu_exceeded
        with pytest.raises(CpuLimitInterrupt):
            meter.on_signal(0, sys._getframe())
        assert scope.cpu_exceeded
    finally:
        CURRENT.reset(token)
        loop.close()
