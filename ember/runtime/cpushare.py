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
  itself if it ended without a report). Past it, the request with the largest ``possible`` is
  interrupted and, if the isolate does not end it within the grace, killed with the isolate, as
  a request past its limit was before the split existed.

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


def charge(request: Any, limit: float) -> float:
    """What a finished request counts for in its busy period's budget."""
    if not request.cpu_final:
        return limit
    return min(request.cpu_known, limit + GRACE_CPU_S)


def budget(charged: float, in_flight: int, limit: float) -> float:
    """The CPU a busy period may use so far: finished requests' charges, in-flight limits."""
    return charged + in_flight * limit


def report(request: Any, cpu_us: int, at: float, now: float) -> None:
    """The isolate says ``request`` ran ``cpu_us`` as of its process CPU ``at`` (seconds):
    never before what was known, never after the supervisor's own reading ``now``."""
    request.cpu_known = max(request.cpu_known, cpu_us / 1e6)
    request.cpu_seen = min(max(request.cpu_seen, at), now)
