"""The deadline for a request body (``server.body_timeout``, ``server.body_min_rate``).

A client that sent a head announcing ``Content-Length: 1000000`` (or a chunked body) and then one
byte every 10 s held a connection and a task for ever on every route but the workers' (whose
router bounded a small body by the wall limit): the client/v4 API, KV values, uploads, the AI
routes. ``httphead.BoundedHeadProtocol`` now gives every body a deadline, in one place for all
routes; past it the answer is ``408 Request Timeout`` and the connection is closed (RFC 9110
15.5.9), and the application sees the client gone (``http.disconnect``), so nothing of the half
body is stored or deployed (every control-plane route reads its body whole before acting; a
worker reading a streamed body sees the client disconnect, as when one leaves).

The rule, mod_reqtimeout's (Apache: ``RequestReadTimeout body=20,MinRate=500``): the whole body
must arrive within ``body_timeout_s`` of the end of its head, plus one second for every
``body_min_rate`` bytes that arrived, not counting the time the server itself held the body
back. Neither of the simpler bounds fits:

- nginx's ``client_body_timeout`` bounds only the gap between two reads: a client sending one
  byte every 59 s holds its connection for ever, which is the defect itself;
- a bare deadline for the whole body refuses an honest upload on a slow link: the workers take
  100 MiB, which in 60 s needs 14 Mbit/s of uplink.

With the default 8 KiB/s a 100 MiB upload may take hours at 64 kbit/s, while holding a
connection past the first minute costs a client 8 KiB every second, against nothing before.

The server holds a body back while it does not read (uvicorn pauses reading once 64 KiB wait
unread for the application, and behind a pipelined request) and while a running request's
``Expect: 100-continue`` is not yet answered: ``HeldFlow`` counts that time, and the deadline
moves by it.
A pipelined request queued behind a running one is not timed at all until it starts (its 408
would cut into the answer before it): its clock starts again then.
A body that arrives with its head (most: ``env.AI.run`` POSTs, small API calls) arms no timer.
"""

from __future__ import annotations

from collections.abc import Callable

from uvicorn.protocols.http.flow_control import FlowControl

from ember.runtime.connguard import ConnectionLimits


class HeldFlow(FlowControl):
    """uvicorn's flow control, also counting how long the server held the request body back:
    reading paused, or a request waiting for ``100 Continue`` (``await_continue`` until
    ``continued``).

    The two are kept apart: uvicorn resumes reading whenever a response ends (the next
    pipelined request starts then), which says nothing about a ``100 Continue`` still unsent;
    the client of that request may not send its body until it is. The time counted is the
    time either holds, once.
    """

    def __init__(self, transport: object, clock: Callable[[], float]) -> None:
        super().__init__(transport)  # type: ignore[arg-type]
        self._clock = clock
        self._awaiting_continue = False
        self._held_since: float | None = None
        self._held_s = 0.0

    def pause_reading(self) -> None:
        super().pause_reading()
        self._settle()

    def resume_reading(self) -> None:
        super().resume_reading()
        self._settle()

    def await_continue(self) -> None:
        """The running request waits for ``100 Continue`` (its application has not asked for
        the body yet)."""
        self._awaiting_continue = True
        self._settle()

    def continued(self) -> None:
        """``100 Continue`` was written, or the final answer started: the wait is over."""
        self._awaiting_continue = False
        self._settle()

    def _settle(self) -> None:
        held = self.read_paused or self._awaiting_continue
        if held and self._held_since is None:
            self._held_since = self._clock()
        elif not held and self._held_since is not None:
            self._held_s += self._clock() - self._held_since
            self._held_since = None

    def held_s(self, now: float) -> float:
        """Seconds held back in all, until ``now``."""
        since = self._held_since
        return self._held_s + (now - since if since is not None else 0.0)


class BodyClock:
    """One request body's deadline: started at the end of its head, moved by what arrives and by
    the time the server held the body back."""

    __slots__ = ("_limits", "_flow", "_start", "_held_at_start", "received")

    def __init__(self, limits: ConnectionLimits, flow: HeldFlow, now: float) -> None:
        self._limits = limits
        self._flow = flow
        self.restart(now)

    def restart(self, now: float) -> None:
        """Count from ``now`` (a pipelined request's, when it starts after the one before)."""
        self._start = now
        self._held_at_start = self._flow.held_s(now)
        self.received = 0  # bytes read since the head ended (framing included after its read)

    def left(self, now: float) -> float:
        """Seconds until the deadline (zero or less: passed)."""
        limits = self._limits
        held = self._flow.held_s(now) - self._held_at_start
        allowance = limits.body_timeout_s + held + self.received / limits.body_min_rate
        return self._start + allowance - now


def timeout_message(limits: ConnectionLimits) -> bytes:
    names = limits.names
    return (
        f"Request Timeout: the request body did not arrive within {limits.body_timeout_s:g} s "
        f"of its head, plus 1 s per {limits.body_min_rate} bytes received "
        f"({names.body_timeout}, {names.body_min_rate})\n"
    ).encode("ascii")
