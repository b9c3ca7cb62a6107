"""Temporary accounts end at their expiry instant, not when the sweep deletes them.

README promises a temporary account "is gone at that instant". Routes and tokens already
answered as deleted ones from then on, but a request in flight ran on (streaming, calling
``env.AI`` and ``env.KV``) until the sweep, up to ``--gc-interval`` later, and then on to its
wall-time limit. ``AccountExpiry`` keeps each live temporary account's end, in step with the
database (``LiveDeployments`` watches an account when it reconciles one of its workers and
forgets it once the account is claimed or dropped):

- a timer fires at the end and hands the account to ``on_expired`` (``Platform`` stops its
  isolates, crons and tails);
- ``refusal`` is asked before each binding call of its workers (``Supervisor.call_refusal``):
  from the end on every call is refused, so nothing one does in the moments before its isolate
  is killed succeeds either.

The end is on the control plane's clock (wall time); the timer runs on the event loop's
(monotonic), so one that fires early (the wall clock stepped forward less, or back) waits again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

MIN_WAIT_S = 0.05  # a timer that fired early waits at least this long again


class AccountExpiry:
    """The end of each live temporary account: a timer, and its workers' binding-call gate."""

    def __init__(
        self, clock: Callable[[], float], on_expired: Callable[[str], Awaitable[None]]
    ) -> None:
        self._clock = clock
        self._on_expired = on_expired
        self._ends: dict[str, float] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._running: set[asyncio.Future[None]] = set()  # on_expired calls, kept referenced

    def watch(self, account_id: str, ends_at: float) -> None:
        """The account ends at ``ends_at`` (seconds since the epoch, the control plane's)."""
        if self._ends.get(account_id) == ends_at and account_id in self._timers:
            return
        self._ends[account_id] = ends_at
        self._schedule(account_id, ends_at - self._clock())

    def forget(self, account_id: str) -> None:
        """The account no longer ends (claimed) or is already stopped (dropped)."""
        self._ends.pop(account_id, None)
        timer = self._timers.pop(account_id, None)
        if timer is not None:
            timer.cancel()

    def refusal(self, account_id: str) -> str | None:
        """Why the account's workers may make no binding call now; None while it lives."""
        ends = self._ends.get(account_id)
        if ends is None or self._clock() < ends:
            return None
        when = datetime.fromtimestamp(ends, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (
            f"this worker's temporary account expired at {when}: it is deleted with its "
            "workers and data, and its bindings refuse every call"
        )

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for running in self._running:
            running.cancel()

    def _schedule(self, account_id: str, delay: float) -> None:
        old = self._timers.pop(account_id, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._timers[account_id] = loop.call_later(max(0.0, delay), self._fire, account_id)

    def _fire(self, account_id: str) -> None:
        self._timers.pop(account_id, None)
        ends = self._ends.get(account_id)
        if ends is None:
            return
        left = ends - self._clock()
        if left > 0:
            self._schedule(account_id, max(left, MIN_WAIT_S))
            return
        running = asyncio.ensure_future(self._on_expired(account_id))
        self._running.add(running)
        running.add_done_callback(self._running.discard)
