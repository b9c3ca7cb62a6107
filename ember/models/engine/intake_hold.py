"""When the engine holds a step back for requests still arriving (``AsyncEngine``'s intake hold).

Requests the HTTP layer is still taking in (``expect``: body, validation, chat template,
tokenization) hold the next step back: the step would only leave them for the one after (a
whole step later, ~45 ms at 64 streams on CPU), and both sides need the GIL, so taking them in
while a forward runs slows the two of them (every torch op releases the GIL and waits to take it
back). A burst that reaches the server spread over tens of ms (through a pool, a gateway) then
gets one prefill, as one sent all at once does. The engine holds only while the requests being
taken in are at least as many as those it runs (a batch being formed, not one newcomer next to a
running batch: that one waits a step, as in any continuous batching), and at most twice as long
as the last step took (never past ``hold_max_s``): the taking in of a burst of 64 takes 60-90 ms
here, about two steps; waiting much longer would cost the requests already in more than the late
ones gain, as when requests trickle in one by one. That bound grows with the newcomers per running
request: when one request of a burst was prefilled alone (it came first, with nothing else in
sight) and 63 are being taken in, two steps of that one short step would leave the 63 spread over
several; the hold's cost (its length times the running requests) stays in proportion to what it
saves (a step for each newcomer). When a batch forms from idle, the engine first
lets the caller's event loop read what has already arrived (``_sync_with_intake``): the first
request of a burst is usually taken in before the loop has even read the others, whose bytes sit
unread in their sockets, and stepping at once would prefill it alone and leave the rest for a
whole step later. A barrier is announced like a request and forgotten by the loop two callbacks
later, after the tasks its next poll created have run their first step (the routes announce
themselves there, ``expect``); the hold then waits for those as for any announced request. It
costs one round trip to the loop when a batch starts from idle (SGLang likewise drains every
arrived request before it forms a batch).

Announcements only cover requests the server has started to read. A burst that reaches the
server spread out (through a proxy that starts its requests one after the other, or from a
client that writes them one by one) leaves gaps where nothing is announced yet, and the step
would start with the first few. So a batch being formed (at least two new requests, and at
least as many as run) also waits while requests keep arriving less than ``burst_gap_s`` apart:
a burst's stragglers join its prefill instead of waiting a whole step, and a lone request, or
a newcomer next to a running batch, never waits for the gap.

``IntakeHold`` keeps the announcements and decides; ``AsyncEngine`` waits on its command queue
for as long as it says. Its state is guarded by the engine's lock (held by every caller), so a
request's submission (announcement withdrawn, command queued) is one step for the hold: it sees
the announcement or the command, never neither.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

# The longest the engine thread holds a step back for requests that are being taken in (and at
# most HOLD_STEPS times the last step's duration), and how long an announced request is waited
# for at all (one that never comes, e.g. its client left, stops counting then).
HOLD_MAX_S = 0.1
HOLD_STEPS = 2.0
EXPECT_FOR_S = 0.1
# A batch being formed waits while its requests arrive closer together than this (bounded as
# any hold). On 2 CPUs a burst of 64 from one client pauses for up to 3-4 ms between requests
# (bench.ai_burst_probe's largest_announce_gaps_ms); a pair arriving together pays at most this.
BURST_GAP_S = 0.004


@dataclass(frozen=True, slots=True)
class HoldSettings:
    hold_max_s: float = HOLD_MAX_S
    hold_steps: float | None = HOLD_STEPS  # None: only hold_max_s bounds a hold
    expect_for_s: float = EXPECT_FOR_S
    burst_gap_s: float = BURST_GAP_S  # 0: no waiting for a burst's stragglers


class IntakeHold:
    """Announced requests and the last arrivals; every method but ``may_hold`` is called with
    the engine's lock held (the lock that also guards what the engine submits)."""

    def __init__(self, settings: HoldSettings) -> None:
        self.settings = settings
        self._expected: dict[str, float] = {}  # request id -> monotonic time it stops counting
        self._last_arrival = 0.0  # monotonic time of the latest announcement or submission
        self.last_step_s = 0.0  # how long the engine's last step with work took (engine thread)

    def announce(self, key: str, *, arrival: bool) -> None:
        """``key`` is being taken in (``arrival``: a request, not an intake barrier)."""
        now = time.monotonic()
        self._expected[key] = now + self.settings.expect_for_s
        if arrival:
            self._last_arrival = now

    def withdraw(self, key: str) -> bool:
        """``key`` will not come; True if it was announced (a hold may be waiting for it)."""
        return self._expected.pop(key, None) is not None

    def submitted(self, key: str) -> None:
        """``key``'s command is being queued: no longer announced, and an arrival."""
        self._expected.pop(key, None)
        self._last_arrival = time.monotonic()

    def may_hold(self, fresh: int) -> bool:
        """Whether the step about to run may have to wait (a cheap check, without the lock:
        ``until`` decides). ``fresh``: the requests added since the last step."""
        return bool(self._expected) or (fresh >= 2 and self.settings.burst_gap_s > 0)

    def until(self, now: float, fresh: int, running: int) -> float | None:
        """Until when the next step waits, or None to step now. ``fresh``: the requests added
        since the last step (the batch being formed); ``running``: the requests it runs."""
        for request_id in [r for r, until in self._expected.items() if until <= now]:
            del self._expected[request_id]
        # Requests being taken in, at least as many as run: a batch is being formed.
        if self._expected and len(self._expected) >= running:
            return max(self._expected.values())
        # A burst still arriving: its next request is due within the gap.
        gap = self.settings.burst_gap_s
        if fresh >= 2 and fresh >= running and gap > 0:
            until = self._last_arrival + gap
            if until > now:
                return until
        return None

    def bound(self, fresh: int, running: int) -> float:
        """How long a hold may last: ``hold_steps`` times the last step, times the newcomers
        (``fresh`` ones and those announced) per running request when they are more; never more
        than ``hold_max_s``."""
        settings = self.settings
        if settings.hold_steps is None:
            return settings.hold_max_s
        newcomers = fresh + len(self._expected)
        per_running = newcomers / running if running else 1.0
        return min(
            settings.hold_max_s, settings.hold_steps * self.last_step_s * max(1.0, per_running)
        )
