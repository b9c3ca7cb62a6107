"""Small helpers for parsing text that arrives in pieces: find the first of several markers,
know how much of a buffer is safe to release (no suffix that could start a marker), and
trim whitespace at the edges of a streamed segment without ever taking back sent text."""

from __future__ import annotations

from collections.abc import Sequence


def find_first(text: str, markers: Sequence[str], start: int = 0) -> tuple[int, str] | None:
    """``(index, marker)`` of the earliest marker in ``text`` (longest first on ties)."""
    best: tuple[int, str] | None = None
    for marker in markers:
        index = text.find(marker, start)
        if index >= 0 and (
            best is None or index < best[0] or (index == best[0] and len(marker) > len(best[1]))
        ):
            best = (index, marker)
    return best


def safe_length(text: str, markers: Sequence[str]) -> int:
    """How much of ``text`` can be released: all of it but the longest suffix that is a
    proper prefix of some marker (that suffix may become the marker with the next piece)."""
    longest = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return len(text) - longest


class TrimmedSegment:
    """Releases a segment's text with leading whitespace dropped and trailing whitespace held
    back until more non-whitespace text follows (dropped if the segment ends first)."""

    def __init__(self, trim_leading: bool = True) -> None:
        self.started = not trim_leading
        self.pending = ""

    def push(self, text: str) -> str:
        if not text:
            return ""
        if not self.started:
            text = text.lstrip()
            if not text:
                return ""
            self.started = True
        joined = self.pending + text
        body = joined.rstrip()
        self.pending = joined[len(body) :]
        return body

    def drop_pending(self) -> None:
        self.pending = ""
