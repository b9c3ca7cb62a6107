"""Session affinity's table: which replica each tenant's ``x-session-affinity`` value is pinned to.

A pin is keyed by the tenant (its account on ``ember serve``: the request's ``Fairness`` id) and
the value, never by the value alone: another account sending (or guessing) the same value is
placed on its own, and learns nothing of where the first one's conversation lives (review22).

The table is bounded (``capacity`` pins in all), and so is each tenant's part of it
(``per_tenant``): past its share a tenant's own least recently used pin goes. When the whole
table is full the pin to go is the least recently used one of the tenant holding the most (of
equal holders, the one least recently active), so accounts flooding it with keys evict their own
pins, not everybody's. Requests without a tenant
(``ember dev``'s one user, internal callers) may use the whole table.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

MAX_SESSIONS = 4096
# A tenant's share: a quarter of the table (1024 pins), far more conversations than one account
# keeps going on a model at once, and too few for one account to crowd others out.
MAX_SESSIONS_PER_TENANT = MAX_SESSIONS // 4

R = TypeVar("R")


class SessionTable(Generic[R]):
    """Pins ``(tenant, value) -> replica``, least recently used first within each tenant."""

    def __init__(self, capacity: int = MAX_SESSIONS, per_tenant: int = MAX_SESSIONS_PER_TENANT):
        if capacity < 1 or not 1 <= per_tenant <= capacity:
            raise ValueError("capacity >= 1 and 1 <= per_tenant <= capacity")
        self.capacity = capacity
        self.per_tenant = per_tenant
        self._tenants: dict[str | None, OrderedDict[str, R]] = {}
        self._active: dict[str | None, int] = {}  # tenant -> when it last pinned or used a pin
        self._ticks = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def get(self, tenant: str | None, value: str) -> R | None:
        pins = self._tenants.get(tenant)
        return pins.get(value) if pins is not None else None

    def touch(self, tenant: str | None, value: str) -> None:
        """The pin was used: it is the tenant's most recent."""
        pins = self._tenants.get(tenant)
        if pins is not None and value in pins:
            pins.move_to_end(value)
            self._mark_active(tenant)

    def count(self, tenant: str | None) -> int:
        pins = self._tenants.get(tenant)
        return len(pins) if pins is not None else 0

    def pin(self, tenant: str | None, value: str, replica: R) -> None:
        """Pin ``value`` of ``tenant`` to ``replica`` (its most recent pin), within the bounds."""
        pins = self._tenants.setdefault(tenant, OrderedDict())
        if value not in pins:
            self._size += 1
        pins[value] = replica
        pins.move_to_end(value)
        self._mark_active(tenant)
        limit = self.capacity if tenant is None else self.per_tenant
        if len(pins) > limit:
            self._drop_oldest(tenant)
        if self._size > self.capacity:
            # Among the largest holders, another tenant's pin goes before this new one, and of
            # those the least recently active one's (review23: dict order made it the oldest
            # account's, however busy).
            self._drop_oldest(
                max(
                    self._tenants,
                    key=lambda t: (len(self._tenants[t]), t != tenant, -self._active[t]),
                )
            )

    def _drop_oldest(self, tenant: str | None) -> None:
        pins = self._tenants[tenant]
        pins.popitem(last=False)
        self._size -= 1
        if not pins:
            del self._tenants[tenant]
            del self._active[tenant]

    def _mark_active(self, tenant: str | None) -> None:
        self._ticks += 1
        self._active[tenant] = self._ticks
