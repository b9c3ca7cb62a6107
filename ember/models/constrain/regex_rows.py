"""The edges of a wide automaton state that an interval of code points can meet, found by
bisection instead of testing every edge.

A choice list's trie (regex_literals.py) has a node per distinct first character at its root:
50,000 choices of two characters each were 50,000 edges there, each tested at every step from
the root (~49 ms a step, review45), and a first token mask over a real vocabulary steps from it
thousands of times. When a state's edges are many and their classes' ranges do not overlap (a
trie's children, single code points, always), the ranges sorted by start find the edges that
meet ``[low, high]`` in two bisections: the others relate to it as ``NONE``, which a step
ignores, so the result is the same (``RegexAutomaton.resolve``; the test compares both ways).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from ember.models.constrain.charset import CharSet

# Rows this long or shorter are walked whole: a bisection is not cheaper there.
WIDE_ROW = 32

Row = Sequence[tuple[CharSet, frozenset]]


class RowIndex:
    """One wide row's ranges, sorted by start (disjoint: their ends are sorted too), and the
    edge each belongs to."""

    __slots__ = ("starts", "ends", "edge")

    def __init__(self, starts: list[int], ends: list[int], edge: list[int]) -> None:
        self.starts = starts
        self.ends = ends
        self.edge = edge

    def meeting(self, row: Row, low: int, high: int) -> Row:
        """The edges of ``row`` with a code point in ``[low, high]``, in row order."""
        last = bisect_right(self.starts, high)  # ranges starting at or before high
        first = bisect_left(self.ends, low, 0, last)  # of those, the first ending at or after low
        return [row[k] for k in sorted(set(self.edge[first:last]))]


def row_index(row: Row) -> RowIndex | None:
    """The index of a row longer than ``WIDE_ROW`` whose ranges are disjoint; None otherwise
    (walked whole)."""
    if len(row) <= WIDE_ROW:
        return None
    ranges = sorted(
        (low, high, k) for k, (chars, _) in enumerate(row) for low, high in chars.ranges
    )
    for (_, before, _), (after, _, _) in zip(ranges, ranges[1:], strict=False):
        if after <= before:
            return None
    return RowIndex([r[0] for r in ranges], [r[1] for r in ranges], [r[2] for r in ranges])
