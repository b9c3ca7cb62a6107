"""Sets of Unicode scalar values as sorted, disjoint, inclusive ranges: what a regex character
class, ``.`` or a literal matches. Surrogates (U+D800..U+DFFF) are never members: they are not
characters, cannot be encoded in UTF-8, and JSON strings here refuse their escapes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

# How a set relates to an interval of code points.
NONE, SOME, ALL = 0, 1, 2


class CharSet:
    """An immutable set of code points. ``ranges``: sorted, disjoint, non-adjacent, inclusive."""

    __slots__ = ("ranges", "starts", "_hash")

    def __init__(self, ranges: Iterable[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for low, high in sorted(ranges):
            for lo, hi in _without_surrogates(low, high):
                if merged and lo <= merged[-1][1] + 1:
                    merged[-1][1] = max(merged[-1][1], hi)
                else:
                    merged.append([lo, hi])
        self.ranges: tuple[tuple[int, int], ...] = tuple((lo, hi) for lo, hi in merged)
        self.starts = tuple(lo for lo, _ in self.ranges)
        self._hash = hash(self.ranges)

    @classmethod
    def of(cls, *code_points: int) -> CharSet:
        return cls((c, c) for c in code_points)

    def __contains__(self, code_point: int) -> bool:
        i = bisect_right(self.starts, code_point) - 1
        return i >= 0 and code_point <= self.ranges[i][1]

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharSet) and self.ranges == other.ranges

    def __hash__(self) -> int:
        return self._hash

    def __or__(self, other: CharSet) -> CharSet:
        return CharSet(self.ranges + other.ranges)

    def __and__(self, other: CharSet) -> CharSet:
        out, i, j = [], 0, 0
        mine, theirs = self.ranges, other.ranges
        while i < len(mine) and j < len(theirs):
            low = max(mine[i][0], theirs[j][0])
            high = min(mine[i][1], theirs[j][1])
            if low <= high:
                out.append((low, high))
            if mine[i][1] < theirs[j][1]:
                i += 1
            else:
                j += 1
        return CharSet(out)

    def __sub__(self, other: CharSet) -> CharSet:
        return self & other.complement()

    def complement(self) -> CharSet:
        """Every scalar value not in this set."""
        out, low = [], 0
        for lo, hi in self.ranges:
            if lo > low:
                out.append((low, lo - 1))
            low = hi + 1
        if low <= MAX_CODE_POINT:
            out.append((low, MAX_CODE_POINT))
        return CharSet(out)

    def relation(self, low: int, high: int) -> int:
        """``ALL`` when every scalar value in ``[low, high]`` is a member, ``NONE`` when none is,
        else ``SOME``. Surrogates inside the interval are ignored (they are never candidates)."""
        parts = _without_surrogates(low, high)
        kinds = {self._relation(lo, hi) for lo, hi in parts}
        if not kinds:
            return NONE
        return kinds.pop() if len(kinds) == 1 else SOME

    def _relation(self, low: int, high: int) -> int:
        i = bisect_right(self.starts, low) - 1
        if i >= 0 and low <= self.ranges[i][1]:
            return ALL if high <= self.ranges[i][1] else SOME
        # low is in a gap: any range starting at or before high overlaps.
        j = i + 1
        return SOME if j < len(self.ranges) and self.ranges[j][0] <= high else NONE

    def __repr__(self) -> str:
        shown = ",".join(f"{lo:X}" if lo == hi else f"{lo:X}-{hi:X}" for lo, hi in self.ranges[:8])
        return f"CharSet({shown}{',...' if len(self.ranges) > 8 else ''})"


def _without_surrogates(low: int, high: int) -> list[tuple[int, int]]:
    s_low, s_high = SURROGATES
    if high < s_low or low > s_high:
        return [(low, high)] if low <= high else []
    parts = []
    if low < s_low:
        parts.append((low, s_low - 1))
    if high > s_high:
        parts.append((s_high + 1, high))
    return parts


ANY = CharSet([(0, MAX_CODE_POINT)])
# Python's re.ASCII classes (also ECMA-262's \d and \w; ECMA's \s adds Unicode spaces, left out
# so that one definition holds for every route and Python's re can judge outputs).
DIGIT = CharSet([(0x30, 0x39)])
WORD = CharSet([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
SPACE = CharSet([(0x09, 0x0D), (0x20, 0x20)])
NOT_DIGIT = DIGIT.complement()
NOT_WORD = WORD.complement()
NOT_SPACE = SPACE.complement()
NOT_NEWLINE = CharSet.of(0x0A).complement()  # "." (Python's re, Rust's regex, outlines)
