"""Which request of an isolate is over its CPU limit, and the bound no isolate can talk past.

On Cloudflare each request is charged the CPU its own code ran: an isolate runs one event's
code at a time. An ember isolate meters its requests' task steps itself (``isolate/cpumeter.py``)
and says what each one used (``Response``, ``Done``, ``CpuReport``); the supervisor can only read
the isolate's whole process CPU clock. So the two are combined:

- **The split (the isolate's claim)** decides *which* request is over its limit and what each
  one logs as ``cpu_ms``. ``possible`` is the most a request can have used by what the
  supervisor knows: its last reported figure plus all the isolate's CPU since that report. While
  one request's ``possible`` passes the limit the supervisor sends SIGXCPU each poll: the
  isolate interrupts the running request if it is over, and otherwise reports its split (which
  brings every ``possible`` back down to what was reported).
- **The bound (the supervisor's own)**: over a *busy period* (from a request arriving at an
  idle isolate until none is in flight), the isolate's process CPU may not pass ``budget``: the
  limit of each request in flight plus the charge of each request of the period that already
  finished, that is its reported CPU capped at its limit and the interrupt grace (the limit
  itself if it ended without a report), plus its share of the period's CPU that no figure
  covers (the isolate's own overhead), the two together at most its limit (``charge``). Past
  it, the request with the largest ``possible`` is interrupted and, if the isolate does not end
  it within the grace, killed with the isolate, as a request past its limit was before the
  split existed.

Why this is sound against a hostile isolate (its code can forge any figure and ignore SIGXCPU):
the bound uses only the supervisor's own clock reading and the number of requests it sent, and
each finished request adds at most its limit (plus the same interrupt grace a single request
had). So the process CPU of a busy period never passes the sum of the limits of the requests it
served; lying moves CPU among the isolate's own requests (which one fails, what each logs) and
can never buy more. CPU outside any busy period is held to ``idle_cpu_ms`` and startup to
``startup_cpu_ms`` as before (``watchdog.py``). With one request in flight the bound is exactly
the old per-request rule (the process CPU since it started, against its limit).
"""

from __future__ import annotations

from typing import Any

GRACE_CPU_S = 0.1  # CPU an interrupted isolate may still burn before it is killed


def possible(request: Any, cpu: float) -> float:
    """The most CPU ``request`` (an InFlight) can have used when the isolate's clock reads
    ``cpu``: what the isolate last said, plus everything the isolate ran since."""
    return request.cpu_known + max(0.0, cpu - request.cpu_seen)


def uncounted(busy_cpu: float, charged: float, requests: Any, limit: float) -> float:
    """The CPU of a busy period that nobody's figure covers yet: ``busy_cpu`` (the process CPU
    since it began) less the finished requests' charges and what ``requests`` (those still in
    flight, the finishing one included) last said they used, each capped at its limit."""
    known = 0.0
    for request in requests:
        known += min(request.cpu_known, limit)
    return max(0.0, busy_cpu - charged - known)


def charge(request: Any, limit: float, unclaimed: float = 0.0, sharing: int = 1) -> float:
    """What a finished request counts for in its busy period's budget: its own figure (capped
    at its limit and the interrupt grace, or its limit if it ended without one), plus its
    share of the period's ``unclaimed`` CPU among the ``sharing`` requests in flight (itself
    included), that plus its figure capped at its limit.

    The share is the isolate's own overhead for its requests: decoding a request before its
    event starts, encoding Done after it leaves, settles with no step running. Charged only
    the figure, an honest isolate whose requests overlap without a pause (a busy period that
    never ends) fell behind its budget by that overhead on every request until an innocent
    one was stopped at its CPU limit. Charging each finished request its limit outright would
    also be sound (no request adds more than its limit either way), but it would bank every
    cheap request's unused limit for the rest of the period: after a thousand cheap requests,
    one request that forges its figures and ignores SIGXCPU could spin for a thousand limits.
    With the share the budget follows what the isolate actually ran, so such a request is
    still stopped near the in-flight requests' limits.
    """
    if not request.cpu_final:
        return limit
    own = min(request.cpu_known, limit + GRACE_CPU_S)
    return max(own, min(limit, request.cpu_known + unclaimed / sharing))


def budget(charged: float, in_flight: int, limit: float) -> float:
    """The CPU a busy period may use so far: finished requests' charges, in-flight limits."""
    return charged + in_flight * limit


def report(request: Any, cpu_us: int, at: float, now: float) -> None:
    """The isolate says ``request`` ran ``cpu_us`` as of its process CPU ``at`` (seconds):
    never before what was known, never after the supervisor's own reading ``now``."""
    request.cpu_known = max(request.cpu_known, cpu_us / 1e6)
    request.cpu_seen = min(max(request.cpu_seen, at), now)
