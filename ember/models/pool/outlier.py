"""Outlier ejection: a replica whose requests keep failing is taken out of rotation for a while.

Health probes only see ``/health``; a replica can answer those and still fail every request
(it hangs, answers 500, answers garbage). Like Envoy's outlier detection (``consecutive_5xx``,
``base_ejection_time`` doubling to ``max_ejection_time``) and SGLang's router circuit breaker,
each request's outcome feeds its replica's ``Outlier``:

- ``eject_after`` failures in a row (a timeout, a broken connection, a 5xx, an answer that is not
  JSON; never a cancelled request or a 4xx the request caused, nor a timeout the replica held
  for less than half the request's deadline: ``lease.JUDGED_SHARE``) take the replica out of
  rotation for ``eject_time_s``, doubled for each ejection since its last success, up to
  ``max_eject_time_s``;
- when that time is up the replica gets one probe request (others keep going elsewhere; the
  replica wakes the queue then, so a waiting request can be it); its
  success puts the replica back, its failure ejects it again for twice as long;
- any success resets the count.

Admission routes around an ejected replica only while another can serve: a model whose every
ready replica is ejected still sends requests to them (they fail with their own clear error)
rather than refusing them, as Envoy's panic threshold does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the lease module imports the replica, which imports this one
    from ember.models.pool.lease import Lease


@dataclass(frozen=True, slots=True)
class Ejection:
    """The outlier policy (``ai.pool`` keys); ``eject_after`` 0 turns ejection off."""

    eject_after: int = 5
    eject_time_s: float = 30.0
    max_eject_time_s: float = 300.0

    def backoff(self, ejections: int) -> float:
        """How long the ``ejections``-th ejection in a row lasts (the first is never cut
        short by a cap set below it)."""
        cap = max(self.max_eject_time_s, self.eject_time_s)
        return float(min(self.eject_time_s * 2 ** max(ejections - 1, 0), cap))


class Outlier:
    """One replica's recent outcomes and its ejection (``until``: a ``time.monotonic`` time)."""

    def __init__(self, policy: Ejection) -> None:
        self.policy = policy
        self.failures = 0  # failed requests in a row
        self.ejections = 0  # ejections since the last success (the backoff doubles with it)
        self.until: float | None = None  # ejected until then; None: in rotation
        self.probe: Lease | None = None  # the one request sent to see whether it recovered

    @property
    def ejected(self) -> bool:
        """Out of rotation (waiting, or probing)."""
        return self.until is not None

    def takes(self, now: float) -> bool:
        """Whether a request may be routed here now: in rotation, or due for its probe."""
        return self.until is None or (now >= self.until and self.probe is None)

    def leased(self, lease: Lease, now: float) -> None:
        """A request was placed here; the first one after the ejection time is the probe."""
        if self.until is not None and self.probe is None and now >= self.until:
            self.probe = lease

    def succeeded(self) -> bool:
        """A request succeeded; True when that put an ejected replica back in rotation."""
        back = self.until is not None
        self.failures = self.ejections = 0
        self.until = self.probe = None
        return back

    def failed(self, lease: Lease, now: float) -> float | None:
        """A request failed; the ejection time when that ejected the replica (else None).

        While ejected, only the probe's failure counts: the requests that were already in
        flight when it was ejected say nothing new."""
        if self.policy.eject_after <= 0:
            return None
        if self.until is not None:
            if lease is not self.probe:
                return None
        else:
            self.failures += 1
            if self.failures < self.policy.eject_after:
                return None
        self.ejections += 1
        self.failures = 0
        self.probe = None
        seconds = self.policy.backoff(self.ejections)
        self.until = now + seconds
        return seconds

    def released(self, lease: Lease) -> None:
        """A request ended; a probe that ended with no verdict (cancelled) frees the turn."""
        if lease is self.probe:
            self.probe = None
