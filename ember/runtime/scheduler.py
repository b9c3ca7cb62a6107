"""Runs a deployment's ``triggers.crons`` on time (UTC), one scheduled event per firing."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Awaitable, Callable

from ember.runtime.cron import CronExpression, CronNeverFires


class CronScheduler:
    """Fires ``trigger(cron, scheduled_time_ms)`` for each cron when it is due."""

    def __init__(
        self,
        crons: tuple[str, ...],
        trigger: Callable[[str, float], Awaitable[object]],
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.expressions = [CronExpression.parse(c) for c in crons]
        self.trigger = trigger
        self.clock = clock
        self.sleep = sleep

    def next_firing(self, now: float) -> tuple[float, list[str]] | None:
        """The next firing time after ``now`` (epoch seconds) and the crons due then; None
        when none ever fires."""
        moment = datetime.datetime.fromtimestamp(now, datetime.UTC)
        times = {}
        for expression in self.expressions:
            try:
                times[expression.text] = expression.next_after(moment).timestamp()
            except CronNeverFires:
                # A day no month has (``0 0 30 2 *``): it deploys (the config check warns)
                # and never runs; it must not stop the worker's other crons.
                continue
        if not times:
            return None
        first = min(times.values())
        return first, [cron for cron, when in times.items() if when == first]

    async def run(self) -> None:
        """Sleep until each firing, then trigger it (events run concurrently); until cancelled,
        or until no cron fires again (none of ``0 0 30 2 *``)."""
        if not self.expressions:
            return
        while (due := self.next_firing(self.clock())) is not None:
            when, crons = due
            while (delay := when - self.clock()) > 0:
                await self.sleep(min(delay, 60.0))
            for cron in crons:
                asyncio.ensure_future(self.trigger(cron, when * 1000))
