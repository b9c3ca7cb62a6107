"""A request's hold on slots of one replica, and how the replica fails it from outside."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the replica imports this module: the type only, at check time
    from ember.models.pool.fair import Fairness
    from ember.models.pool.replica import Replica

TIMED_OUT = "the request timed out"  # the lease failure a deadline records
# A timeout is the replica's fault only when the replica held the request for at least this
# share of its deadline: one that waited out most of it in the queue and reached a healthy
# replica with milliseconds left says nothing about that replica (charging it would let
# overload eject healthy replicas, and so remove capacity just when it is short).
JUDGED_SHARE = 0.5


@dataclass(eq=False)
class Lease:
    """One request's hold on slots of a replica; ``fail`` stops it from outside. ``weight``:
    the slots it takes, one per sequence the replica will run for it (``n`` choices: n)."""

    replica: Replica
    session: str | None = None
    weight: int = 1
    on_fail: Callable[[str], None] | None = None
    released: bool = False
    failure: str | None = None
    fairness: Fairness | None = None  # whose slot it is (fair.py); None: nobody's in particular
    judged: bool = False  # its outcome was told to the replica's outlier detection
    granted: float = field(default_factory=time.monotonic)  # when the replica got the request
    timeout: float | None = None  # the request's whole deadline (seconds); None: unknown

    def outcome(self, failure: str | None) -> None:
        """The request succeeded (None) or failed (why) through the replica's fault: told to
        its outlier detection once (outlier.py). A cancelled request says nothing, nor does a
        timeout the replica had too little of the deadline to answer in (``JUDGED_SHARE``)."""
        if not self.judged:
            self.judged = True
            if failure == TIMED_OUT and not self.had_its_time():
                return
            self.replica.outcome(self, failure)

    def had_its_time(self) -> bool:
        """Whether the replica held the request for ``JUDGED_SHARE`` of its deadline."""
        if self.timeout is None:
            return True
        return time.monotonic() - self.granted >= JUDGED_SHARE * self.timeout

    @property
    def owner(self) -> str | None:
        return self.fairness.id if self.fairness is not None else None

    def fail(self, reason: str) -> None:
        """The replica died under this request: record why and interrupt it."""
        if self.failure is None and not self.released:
            self.failure = reason
            if self.on_fail is not None:
                self.on_fail(reason)

    def release(self) -> None:
        """The request is over (any outcome): free the slot."""
        if not self.released:
            self.released = True
            self.replica._release(self)
