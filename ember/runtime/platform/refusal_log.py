"""``--log-requests`` lines of refused AI calls, at most ``BURST`` per account a minute.

A refused call costs the platform almost nothing, except its lines: a client flooding past its
AI requests per minute got two lines per refusal (the HTTP API's access line and the ``AI call``
line), 26,636 in one minute (walk18), burying every other account's lines and filling the
operator's disk. Each account (or, for a path that names none, each client address) gets
``BURST`` lines of refusals per ``INTERVAL_S``; the rest are counted, and once the interval is
over (at the next line of that account, the housekeeping's ``flush``, or when the platform
stops) one line says how many were left out:

    2026-05-01T12:01:00.004Z AI refusals account=acme: 26,616 more lines not logged in the
        last 60 s (ember_ai_requests_total counts every call)                    (one line)

Answers are never thinned: the model's capacity bounds them. The metrics count every call
whatever the log wrote (``AITally``), so the operator's numbers stay exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ember.runtime.platform.stamp import utc_stamp

BURST = 20  # lines of refusals one account gets in full per interval
INTERVAL_S = 60.0
MAX_KEYS = 10_000  # past this many in one interval, every summary is written out at once


@dataclass(slots=True)
class _Window:
    started: float
    written: int = 0
    left_out: int = 0


class RefusalLog:
    """Refusal lines per key (an account id, or ``client ADDRESS``), thinned; thread-safe only
    on the event loop, where every line is printed."""

    def __init__(
        self,
        print_line: Callable[[str], None],
        name: Callable[[str], str] = lambda key: key,
        *,
        burst: int = BURST,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._print = print_line
        self._name = name  # an account id -> the name its lines use
        self._burst = burst
        self._interval = interval_s
        self._clock = clock
        self._windows: dict[str, _Window] = {}

    def line(self, key: str, text: str) -> None:
        """Write ``text``, a refusal line of ``key``, unless ``key`` has had its burst."""
        now = self._clock()
        window = self._windows.get(key)
        if window is not None and now - window.started >= self._interval:
            self._close(key, window)
            window = None
        if window is None:
            if len(self._windows) >= MAX_KEYS:
                self.flush(everything=True)
            window = self._windows[key] = _Window(now)
        if window.written < self._burst:
            window.written += 1
            self._print(text)
        else:
            window.left_out += 1

    def flush(self, everything: bool = False) -> None:
        """Write the summaries of the intervals that are over (``everything``: of all, as the
        platform stops) and forget them."""
        now = self._clock()
        for key, window in list(self._windows.items()):
            if everything or now - window.started >= self._interval:
                self._close(key, window)

    def _close(self, key: str, window: _Window) -> None:
        del self._windows[key]
        if window.left_out:
            seconds = min(self._clock() - window.started, self._interval)
            who = key if key.startswith("client ") else f"account={self._name(key)}"
            self._print(
                f"{utc_stamp()} AI refusals {who}: {window.left_out:,} more lines not logged "
                f"in the last {seconds:.0f} s (ember_ai_requests_total counts every call)"
            )
