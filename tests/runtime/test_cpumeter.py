"""The isolate's CPU meter: stretches where one event is live go unmetered (the event is charged
the thread's CPU from when it became the only one) and several live events' steps are timed by
the wall clock with the CPU split in proportion; both must give the figures the reference (a
meter that times every step with the thread's CPU clock) gives on the same work: fresh random
spins, in random orders of events arriving and leaving."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from ember.runtime.isolate.cpumeter import CpuMeter, Metered
from ember.runtime.isolate.scope import CURRENT, RequestScope


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
