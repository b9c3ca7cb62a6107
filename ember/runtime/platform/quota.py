"""Per-account request rates (AI requests per minute, ``platform.temporary`` or ``.accounts``).

A token bucket per account: ``limit`` requests per minute, refilled continuously, starting full.
Past it a request is refused at once with ``RateLimited`` (HTTP 429), which says the limit and
when to retry; nothing queues, so one account's flood costs the others nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ember.runtime.deployments.errors import RateLimited

IDLE_FORGET_S = 600.0


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class AccountRateLimiter:
    """Token buckets keyed by account id."""

    def __init__(self, what: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def acquire(self, account_id: str, per_minute: int, remedy: str = "") -> None:
        """Take one request from the account's bucket, or raise ``RateLimited`` (its message
        ends with ``remedy``: how to get a higher limit)."""
        now = self._clock()
        bucket = self._buckets.get(account_id)
        if bucket is None:
            self._forget_idle(now)
            bucket = self._buckets[account_id] = _Bucket(float(per_minute), now)
        rate = per_minute / 60.0
        bucket.tokens = min(float(per_minute), bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now
        if bucket.tokens < 1.0:
            wait = (1.0 - bucket.tokens) / rate
            otherwise = f", or {remedy}" if remedy else ""
            raise RateLimited(
                f"{self.what}_per_minute",
                per_minute + 1,
                per_minute,
                f"This account may make {per_minute} {self.what.replace('_', ' ')} per minute; "
                f"retry in {wait:.1f} s{otherwise}.",
            )
        bucket.tokens -= 1.0

    def _forget_idle(self, now: float) -> None:
        for key in [k for k, b in self._buckets.items() if now - b.updated > IDLE_FORGET_S]:
            del self._buckets[key]
