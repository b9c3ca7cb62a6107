"""The compiled regex automaton (built by regex_nfa.py, regex_literals.py, or decoded from the
compile worker's answer): a start set, a final state and each state's edges, stepped as sets of
states and memoised, so a grammar determinises it lazily."""

from __future__ import annotations

from collections.abc import Sequence

from ember.models.constrain.charset import ALL, NONE, SOME, CharSet
from ember.models.constrain.regex_rows import WIDE_ROW, Row, RowIndex, row_index

MAX_MEMO = 10_000  # memoised resolve() results per automaton (cleared past it)
StateSet = frozenset  # of state ids
UNRESOLVED = None  # resolve(): the interval straddles a class edge; more bytes decide
_MISSING = object()


class RegexAutomaton:
    """The compiled pattern: ``start`` is the initial state set; ``step``/``resolve`` move a
    set by a code point or by an interval of them (memoised: pure functions of values)."""

    __slots__ = ("pattern", "start", "final", "edges", "work", "_memo", "_rows")

    def __init__(
        self,
        pattern: str,
        start: StateSet,
        final: int,
        edges: Sequence[tuple[tuple[CharSet, StateSet], ...]],
        work: int = 0,
    ) -> None:
        self.pattern = pattern
        # What building it cost (see the module docstring): what a request's budget is charged.
        self.work = max(work, len(edges))
        self.start = start
        self.final = final
        # A list is frozen; another sequence (automaton_wire.LazyEdges: decoded as reached)
        # is kept as it is.
        self.edges = tuple(edges) if isinstance(edges, list) else edges
        self._memo: dict[tuple, StateSet | None] = {}
        self._rows: dict[int, RowIndex | None] = {}  # wide states' indexes (regex_rows.py)

    def accepts(self, states: StateSet) -> bool:
        return self.final in states

    def step(self, states: StateSet, code_point: int) -> StateSet:
        """The set after one code point (empty: refused)."""
        out = self.resolve(states, code_point, code_point)
        assert out is not UNRESOLVED
        return out

    def resolve(self, states: StateSet, low: int, high: int) -> StateSet | None:
        """The set after one code point known only to lie in ``[low, high]``: the set when
        every candidate leads to the same one, an empty set when none is accepted, else
        ``UNRESOLVED`` (some are accepted, some not, or they lead apart)."""
        key = (states, low, high)
        memo = self._memo
        # One lookup, not ``in`` then ``[]``: the automaton is shared between threads
        # (automaton_cache.py), and another may clear the memo between the two.
        found = memo.get(key, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
        out: set[int] = set()
        result: StateSet | None
        for state in states:
            for chars, target in self._meeting(state, low, high):
                kind = chars.relation(low, high)
                if kind == ALL:
                    out |= target
                elif kind == SOME:
                    out = set()
                    break
            else:
                continue
            result = UNRESOLVED
            break
        else:
            result = frozenset(out)
        if len(memo) >= MAX_MEMO:
            memo.clear()
        memo[key] = result
        return result

    def allows_any(self, states: StateSet, low: int, high: int) -> bool:
        """Could some code point in ``[low, high]`` be taken here?"""
        return any(
            chars.relation(low, high) != NONE
            for state in states
            for chars, _ in self._meeting(state, low, high)
        )

    def _meeting(self, state: int, low: int, high: int) -> Row:
        """The state's edges, or of a wide one those that ``[low, high]`` meets."""
        row = self.edges[state]
        if len(row) <= WIDE_ROW:
            return row
        index = self._rows.get(state, _MISSING)
        if index is _MISSING:
            index = self._rows[state] = row_index(row)
        return row if index is None else index.meeting(row, low, high)  # type: ignore[union-attr]
