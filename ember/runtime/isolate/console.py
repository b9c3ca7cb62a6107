"""Console output of handler code, sent to the supervisor as Log frames.

``print`` and anything else writing to ``sys.stdout``/``sys.stderr`` become one Log frame per
line, tagged with the running request; ``js.console.log`` does the same. Lines longer than the
protocol allows are cut, never dropped. All of them go through the isolate's one ``ConsoleOut``:
on ``ember serve`` it holds the isolate to its console budget (``console_gate.py``), dropping
the lines past it before a frame is built and reporting how many (``LogDropped``) before the
next line it lets through and before its request ends.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

from ember.runtime.console_gate import ConsoleGate
from ember.runtime.fields import MAX_TEXT
from ember.runtime.isolate.scope import CURRENT
from ember.runtime.protocol import Log, LogDropped, Message

_CUT = MAX_TEXT - 64


class ConsoleOut:
    """Where every console line of the isolate goes; ``chars_per_s`` None: no budget."""

    __slots__ = ("_send", "gate")

    def __init__(self, send: Callable[[Message], None], chars_per_s: int | None) -> None:
        self._send = send
        self.gate = ConsoleGate(chars_per_s) if chars_per_s else None

    def line(self, level: str, line: str) -> None:
        """Send one console line for the running request (rid 0 outside any)."""
        scope = CURRENT.get(None)
        rid = scope.rid if scope is not None else 0
        if len(line) > _CUT:
            line = line[:_CUT] + " ...[truncated]"
        gate = self.gate
        if gate is not None:
            if not gate.admit(rid, len(line)):
                return
            if gate.tally:
                self._report(gate.take())
        self._send(Log(rid, level, line))

    def ending(self, rid: int) -> None:
        """Request ``rid`` is about to end: report its lines dropped, if any."""
        gate = self.gate
        if gate is not None and gate.tally:
            self._report(gate.take(rid))

    def _report(self, dropped: list[tuple[int, int, int]]) -> None:
        for rid, lines, chars in dropped:
            self._send(LogDropped(rid, lines, chars))


class ConsoleStream(io.TextIOBase):
    """A text stream that turns complete lines into console lines at ``level``."""

    def __init__(self, out: ConsoleOut, level: str) -> None:
        super().__init__()
        self._out = out
        self._level = level
        self._partial = ""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        data = self._partial + text
        *lines, self._partial = data.split("\n")
        for line in lines:
            self._out.line(self._level, line)
        if len(self._partial) > _CUT:
            self._out.line(self._level, self._partial)
            self._partial = ""
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self._out.line(self._level, self._partial)
            self._partial = ""


class Console:
    """``js.console``: log, info, debug, warn, error."""

    def __init__(self, out: ConsoleOut) -> None:
        self._out = out

    def _out_line(self, level: str, args: tuple[Any, ...]) -> None:
        self._out.line(level, " ".join(a if isinstance(a, str) else repr(a) for a in args))

    def log(self, *args: Any) -> None:
        """console.log."""
        self._out_line("log", args)

    def info(self, *args: Any) -> None:
        """console.info."""
        self._out_line("info", args)

    def debug(self, *args: Any) -> None:
        """console.debug."""
        self._out_line("debug", args)

    def warn(self, *args: Any) -> None:
        """console.warn."""
        self._out_line("warn", args)

    def error(self, *args: Any) -> None:
        """console.error."""
        self._out_line("error", args)


class StrayNotice:
    """One warning line on the worker's log when a request's end cancels tasks it started
    without ``ctx.waitUntil`` (workerd cancels them silently; a lazily started background
    consumer then never answers the later requests that wait on it, which hang with no word).
    At most one line per ``every_s`` seconds, naming how many went unreported since."""

    __slots__ = ("_send", "_every_s", "_next", "_quiet")

    def __init__(self, send: Callable[[Message], None], every_s: float = 10.0) -> None:
        self._send = send
        self._every_s = every_s
        self._next = 0.0
        self._quiet = 0  # cancellations since the last line

    def cancelled(self, rid: int, count: int) -> None:
        now = time.monotonic()
        if now < self._next:
            self._quiet += count
            return
        self._next = now + self._every_s
        more = f" ({self._quiet} more since the last notice)" if self._quiet else ""
        self._quiet = 0
        tasks = "a task" if count == 1 else f"{count} tasks"
        line = (
            f"{tasks} started without ctx.waitUntil cancelled when request {rid} ended{more}: "
            "as on Cloudflare, a request's leftover tasks end with it; pass the work to "
            "ctx.waitUntil, or start it in the request that awaits it"
        )
        self._send(Log(0, "warn", line))  # rid 0: its request is over
