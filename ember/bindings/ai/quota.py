"""Per-worker AI quotas, so one tenant cannot starve another.

Each quota scope (``Tenant.quota``: a worker, all its versions together, or an account for the
REST API) gets a token bucket of requests per
minute and a cap on requests in flight. Past either, the request is refused at once with 3036
(HTTP 429) and a ``Retry-After``; nothing waits here. An account may have many workers, so on
``ember serve`` the model pool also caps each account's share of a model and serves its queue
fairly between accounts (``ember.models.pool.fair``; isolation.md §6.3). Buckets of idle
tenants are dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ember.bindings.ai.tenant import describe_scope
from ember.errors import ConfigError
from ember.models.pool.errors import quota_exceeded

IDLE_TENANT_S = 600.0


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """Requests per minute and in flight, per tenant."""

    requests_per_minute: int = 6000
    concurrent_requests: int = 256

    @classmethod
    def parse(cls, value: object, file: str, key: str = "ai.limits") -> QuotaLimits:
        """``{requests_per_minute: N, concurrent_requests: N}`` -> QuotaLimits."""
        if value is None:
            return cls()
        if not isinstance(value, dict):
            raise ConfigError(file, key, value, "a mapping such as {requests_per_minute: 600}")
        fields = {"requests_per_minute": 1_000_000, "concurrent_requests": 100_000}
        parsed: dict[str, int] = {}
        for name, item in value.items():
            if name not in fields:
                raise ConfigError(
                    file, f"{key}.{name}", name, "requests_per_minute or concurrent_requests"
                )
            if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= fields[name]:
                raise ConfigError(
                    file, f"{key}.{name}", item, f"an integer from 1 to {fields[name]}"
                )
            parsed[name] = item
        return cls(**parsed)


@dataclass(slots=True)
class _Tenant:
    tokens: float
    updated: float
    in_flight: int = 0


class QuotaBook:
    """The quotas of every tenant of one gateway."""

    def __init__(self, limits: QuotaLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._tenants: dict[str, _Tenant] = {}

    def acquire(self, tenant: str) -> Callable[[], None]:
        """Admit one request of ``tenant`` (or raise 3036); returns the release function."""
        state = self._admissible(tenant)
        state.tokens -= 1.0
        state.in_flight += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                state.in_flight -= 1

        return release

    def check(self, tenant: str) -> None:
        """Raise the 3036 ``acquire`` would raise now, admitting nothing: a request over its
        quota is refused before the costly part of its parse (its schemas' compile), not
        after (review38)."""
        self._admissible(tenant)

    def _admissible(self, tenant: str) -> _Tenant:
        """``tenant``'s state, its tokens brought up to now; raises 3036 unless one more
        request may start."""
        now = self._clock()
        state = self._tenants.get(tenant)
        rate = self.limits.requests_per_minute / 60.0
        if state is None:
            self._forget_idle(now)
            state = _Tenant(float(self.limits.requests_per_minute), now)
            self._tenants[tenant] = state
        state.tokens = min(
            float(self.limits.requests_per_minute), state.tokens + (now - state.updated) * rate
        )
        state.updated = now
        if state.in_flight >= self.limits.concurrent_requests:
            raise quota_exceeded(
                "concurrent AI requests",
                state.in_flight + 1,
                self.limits.concurrent_requests,
                f"Account limited: {describe_scope(tenant)} already has {state.in_flight} AI "
                f"requests in flight (at most {self.limits.concurrent_requests}); retry when one "
                "finishes.",
                1.0,
            )
        if state.tokens < 1.0:
            wait = (1.0 - state.tokens) / rate
            raise quota_exceeded(
                "AI requests per minute",
                self.limits.requests_per_minute + 1,
                self.limits.requests_per_minute,
                f"Account limited: {describe_scope(tenant)} used its "
                f"{self.limits.requests_per_minute} AI requests per minute; retry in {wait:.1f} s.",
                wait,
            )
        return state

    def in_flight(self, tenant: str) -> int:
        state = self._tenants.get(tenant)
        return state.in_flight if state is not None else 0

    def _forget_idle(self, now: float) -> None:
        if len(self._tenants) < 1024:
            return
        for name, state in list(self._tenants.items()):
            if state.in_flight == 0 and now - state.updated > IDLE_TENANT_S:
                del self._tenants[name]
