"""How much console output an isolate may send: a budget per second, the lines past it dropped.

Every console line an isolate prints crosses its socket and is decoded, redacted and turned
into an event in the supervisor that every tenant shares: about 7 µs a line, so a worker
printing in a loop (55,000 lines a second) took a third of a core there and doubled the other
tenants' latency. Cloudflare keeps 256 KB of an invocation's logs and drops the rest (changelog
2025-04-07, "Capture up to 256 KB of log events in each Workers Invocation"); ember gives each
isolate ``chars_per_s`` characters of console output per one-second window (``ember serve``:
256,000, so one invocation of a quiet isolate keeps its 256 KB), each line counted as at least
``MIN_LINE_CHARS`` (so at most 4,000 short lines a second). Past it, lines are dropped before
anything is built for them, and counted per request; the count is reported once per request
that lost lines (when it ends) and once per window (at the next line let through), as a
``LogDropped`` frame the supervisor turns into one warn line of the invocation's log.

The isolate's console applies the gate to what it sends (a line dropped there never crosses the
socket), and the supervisor applies one ``BACKSTOP`` times as wide to what it receives, since
an isolate is never trusted to limit itself: a worker writing frames of its own is bounded too.

    gate = ConsoleGate(256_000)
    if gate.admit(rid, len(line)):
        for rid_, lines, chars in gate.take():   # what was dropped before, reported first
            ...
        send(line)
    ...
    for rid_, lines, chars in gate.take(rid):    # the request ends (and no request's)
        ...
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Cloudflare's 256 KB of logs per invocation, as characters (a str's length costs nothing).
CHARS_PER_SECOND = 256_000
MIN_LINE_CHARS = 64  # what one line costs at least: bounds lines (4,000 a second) as well
WINDOW_S = 1.0
# The supervisor's gate is this much wider than the isolate's own: windows that do not line up
# and frames read late must never make it drop lines that an honest isolate let through.
BACKSTOP = 4


class ConsoleGate:
    """One isolate's console budget: a fixed window of characters, and the tally of the lines
    dropped past it, per request id (0: outside any request)."""

    __slots__ = ("chars_per_s", "_clock", "_ends", "_left", "tally")

    def __init__(self, chars_per_s: int, clock: Callable[[], float] = time.monotonic) -> None:
        assert chars_per_s >= MIN_LINE_CHARS, "a budget lets at least one line through"
        self.chars_per_s = chars_per_s
        self._clock = clock
        self._ends = float("-inf")
        self._left = 0
        # request id -> [lines, characters] dropped and not yet reported (empty: none).
        self.tally: dict[int, list[int]] = {}

    def admit(self, rid: int, chars: int) -> bool:
        """Whether a line of ``chars`` characters of request ``rid`` fits; if not, it is
        counted as dropped."""
        now = self._clock()
        if now >= self._ends:
            self._ends = now + WINDOW_S
            self._left = self.chars_per_s
        charge = chars if chars > MIN_LINE_CHARS else MIN_LINE_CHARS
        if charge <= self._left:
            self._left -= charge
            return True
        self.drop(rid, 1, chars)
        return False

    def drop(self, rid: int, lines: int, chars: int) -> None:
        """Count ``lines`` of ``chars`` characters of request ``rid`` as dropped."""
        counts = self.tally.get(rid)
        if counts is None:
            self.tally[rid] = [lines, chars]
        else:
            counts[0] += lines
            counts[1] += chars

    def take(self, rid: int | None = None) -> list[tuple[int, int, int]]:
        """(request id, lines, characters) dropped since the last report: of request ``rid``
        and of no request (0), the report due when ``rid`` ends; or of every request (None).
        Forgotten once taken."""
        if rid is None:
            taken = [(r, lines, chars) for r, (lines, chars) in self.tally.items()]
            self.tally.clear()
            return taken
        return [(r, *self.tally.pop(r)) for r in dict.fromkeys((rid, 0)) if r in self.tally]


def dropped_notice(lines: int, chars: int, chars_per_s: int) -> str:
    """The line an invocation's log gets where its console output was dropped."""
    noun = "line" if lines == 1 else "lines"
    return (
        f"[ember] {lines:,} console {noun} ({chars:,} characters) dropped: an isolate sends at "
        f"most {chars_per_s:,} characters of console output a second (each line counts as at "
        f"least {MIN_LINE_CHARS})"
    )
