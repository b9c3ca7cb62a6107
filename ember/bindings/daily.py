"""What each account used today, against allowances that reset at 00:00 UTC.

Cloudflare's Free plan bounds some shared resources per day rather than per minute: KV reads,
writes, deletes and lists, and Workers AI neurons (reference/workers-api.md §1.9 and §5.1), all
"reset at 00:00 UTC". ``DailyUsage`` is that day's ledger for one process: keyed by anything (an
account, an account and an operation), cleared whenever the clock reaches a new UTC day.

Kept in memory, not in the state directory: counting every KV read in SQLite would cost the
shared database file a write per read, the very load these allowances bound. A restarted
``ember serve`` therefore starts every account on a fresh day; an account cannot restart it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

SECONDS_PER_DAY = 86_400


def utc_day(now: float) -> int:
    """Days since the epoch: the UTC day ``now`` (seconds since the epoch) falls in."""
    return int(now // SECONDS_PER_DAY)


def seconds_to_reset(now: float) -> float:
    """Seconds from ``now`` to the next 00:00 UTC."""
    return (utc_day(now) + 1) * SECONDS_PER_DAY - now


class DailyUsage:
    """Amounts used today per key; thread-safe (the KV store's thread and the event loop)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._day: int | None = None
        self._used: dict[Hashable, float] = {}

    def _today(self) -> None:
        """Forget every count of an earlier day (the caller holds the lock)."""
        day = utc_day(self.clock())
        if day != self._day:
            self._day = day
            self._used.clear()

    def used(self, key: Hashable) -> float:
        """How much ``key`` used today."""
        with self._lock:
            self._today()
            return self._used.get(key, 0.0)

    def take(self, key: Hashable, amount: float, allowance: float) -> bool:
        """Count ``amount`` for ``key`` if today's total stays within ``allowance``; False (and
        nothing counted) if it would not."""
        with self._lock:
            self._today()
            used = self._used.get(key, 0.0)
            if used + amount > allowance:
                return False
            self._used[key] = used + amount
            return True

    def add(self, key: Hashable, amount: float) -> None:
        """Count ``amount`` for ``key`` whatever the allowance (a cost known only afterwards,
        such as an AI answer's neurons)."""
        with self._lock:
            self._today()
            self._used[key] = self._used.get(key, 0.0) + amount

    def seconds_to_reset(self) -> float:
        """Seconds until the allowances are whole again (the next 00:00 UTC)."""
        return seconds_to_reset(self.clock())
