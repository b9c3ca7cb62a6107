"""Console output of handler code, sent to the supervisor as Log frames.

``print`` and anything else writing to ``sys.stdout``/``sys.stderr`` become one Log frame per
line, tagged with the running request; ``js.console.log`` does the same. Lines longer than the
protocol allows are cut, never dropped.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from ember.runtime.fields import MAX_TEXT
from ember.runtime.isolate.scope import CURRENT
from ember.runtime.protocol import Log, Message

_CUT = MAX_TEXT - 64


class ConsoleStream(io.TextIOBase):
    """A text stream that turns complete lines into Log frames at ``level``."""

    def __init__(self, send: Callable[[Message], None], level: str) -> None:
        super().__init__()
        self._send = send
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
            emit(self._send, self._level, line)
        if len(self._partial) > _CUT:
            emit(self._send, self._level, self._partial)
            self._partial = ""
        return len(text)

    def flush(self) -> None:
        if self._partial:
            emit(self._send, self._level, self._partial)
            self._partial = ""


def emit(send: Callable[[Message], None], level: str, line: str) -> None:
    """Send one console line for the running request (rid 0 outside any)."""
    scope = CURRENT.get(None)
    if len(line) > _CUT:
        line = line[:_CUT] + " ...[truncated]"
    send(Log(scope.rid if scope is not None else 0, level, line))


class Console:
    """``js.console``: log, info, debug, warn, error."""

    def __init__(self, send: Callable[[Message], None]) -> None:
        self._send = send

    def _out(self, level: str, args: tuple[Any, ...]) -> None:
        emit(self._send, level, " ".join(a if isinstance(a, str) else repr(a) for a in args))

    def log(self, *args: Any) -> None:
        """console.log."""
        self._out("log", args)

    def info(self, *args: Any) -> None:
        """console.info."""
        self._out("info", args)

    def debug(self, *args: Any) -> None:
        """console.debug."""
        self._out("debug", args)

    def warn(self, *args: Any) -> None:
        """console.warn."""
        self._out("warn", args)

    def error(self, *args: Any) -> None:
        """console.error."""
        self._out("error", args)
