"""Raw text that a regex automaton matches and that never spells one of a few strings (GLM's
tool-call markers): ``RawRegexText``, for a string argument written between ``<arg_value>`` and
``</arg_value>``, where a spelled marker would be split there by the output parser.

A guard checked apart from the pattern could strand a matcher whose pattern goes on only
through a marker (``^(a<tool_call>|b)$`` after ``a<tool_call``): JSON strings can afford one,
since every character has an escaped spelling, raw text cannot. So a step is allowed only into
states that can still complete without a marker: the matcher keeps the automaton's state set
and the guard's state (the longest suffix of the text that is a proper prefix of a marker, as
Aho-Corasick's), and drops every automaton state that could only go on by spelling one.

Whether a pair (automaton state, guard state) can complete is decided lazily, as the
automaton itself is determinised: most pairs have a cheap certificate (a path to the end that
never takes a marker's first character, ``<``, and whose first character breaks off the
guard's pending prefix); the rest are searched and memoised. Building the whole product up
front instead cost over a second and tens of thousands of states for ``^.{0,1000}$``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ember.models.constrain.charset import CharSet
from ember.models.constrain.nodes import (
    CONSUME,
    POP,
    SPECIAL_BASE,
    UTF8_BETWEEN,
    UTF8_CONTINUE,
    Move,
    Node,
)
from ember.models.constrain.regex_nfa import MAX_MEMO, UNRESOLVED, RegexAutomaton, StateSet
from ember.models.constrain.regex_nodes import (
    LEAD_BITS,
    REMAINING,
    continue_interval,
    lead_interval,
)
from ember.models.constrain.regex_syntax import RegexError

_NONE: tuple[Move, ...] = ()
_POP: tuple[Move, ...] = ((POP,),)
Pair = tuple[int, str]  # (automaton state, guard state)


class SpellsForbidden(RegexError):
    """Every text the pattern matches contains one of the forbidden strings."""


class Avoider:
    """The guard over code points: its state is the pending marker prefix (``""``: none)."""

    def __init__(self, forbidden: Sequence[str]) -> None:
        self.forbidden = tuple(f for f in forbidden if f)
        if not all(f.isascii() for f in self.forbidden):
            raise ValueError("forbidden strings must be ASCII (other characters reset the guard)")
        self.prefixes = frozenset(f[:i] for f in self.forbidden for i in range(len(f)))
        self.alphabet = sorted({ord(c) for f in self.forbidden for c in f})
        self.alphabet_set = CharSet.of(*self.alphabet)
        self.first = CharSet.of(*{ord(f[0]) for f in self.forbidden})
        self.splits: dict[tuple[str, CharSet], tuple[tuple[CharSet, str], ...]] = {}

    def step(self, state: str, code: int) -> str | None:
        """The state after character ``code``; None when it completes a forbidden string."""
        if code >= 0x80:
            return ""
        text = state + chr(code)
        if any(text.endswith(f) for f in self.forbidden):
            return None
        while text not in self.prefixes:
            text = text[1:]
        return text

    def split(self, state: str, chars: CharSet) -> tuple[tuple[CharSet, str], ...]:
        """``chars`` taken in ``state``, grouped by the state each leads to."""
        key = (state, chars)
        found = self.splits.get(key)
        if found is None:
            groups: dict[str, list[int]] = {}
            for code in self.alphabet:
                if code in chars:
                    nxt = self.step(state, code)
                    if nxt is not None:
                        groups.setdefault(nxt, []).append(code)
            out = {nxt: CharSet.of(*codes) for nxt, codes in groups.items()}
            rest = chars - self.alphabet_set
            if rest:
                out[""] = out[""] | rest if "" in out else rest
            found = self.splits[key] = tuple((part, nxt) for nxt, part in out.items())
        return found


class Liveness:
    """Which pairs (automaton state, guard state) can still reach the end of a match without
    spelling a forbidden string. ``start``: the live start states (empty: every match spells
    one, ``SpellsForbidden``)."""

    def __init__(self, regex: RegexAutomaton, avoider: Avoider) -> None:
        self.regex = regex
        self.avoider = avoider
        self.memo: dict[Pair, bool] = {}
        self.escapes: dict[int, CharSet] = {}
        self.free = self._marker_free_states()
        self.start = self.keep(regex.start, "")
        if not self.start:
            raise SpellsForbidden(
                "a pattern whose every match spells a tool-call marker", 0, regex.pattern
            )

    def _marker_free_states(self) -> frozenset[int]:
        """States with a path to the end that never takes a first character of a forbidden
        string: no text along it can spell one."""
        regex, first = self.regex, self.avoider.first
        back: dict[int, list[int]] = {}
        for s, edges in enumerate(regex.edges):
            for chars, targets in edges:
                if chars - first:
                    for t in targets:
                        back.setdefault(t, []).append(s)
        free = {regex.final}
        stack = [regex.final]
        while stack:
            for s in back.get(stack.pop(), ()):
                if s not in free:
                    free.add(s)
                    stack.append(s)
        return frozenset(free)

    def _escape(self, state: int) -> CharSet:
        """The characters that lead from ``state`` to a marker-free state, ``<`` left out."""
        found = self.escapes.get(state)
        if found is None:
            parts = [c for c, targets in self.regex.edges[state] if targets & self.free]
            found = CharSet(r for c in parts for r in c.ranges) - self.avoider.first
            self.escapes[state] = found
        return found

    def _certain(self, pair: Pair) -> bool:
        """A cheap sufficient condition: the end, or a first character that leaves no marker
        prefix pending, into a marker-free state."""
        state, pending = pair
        if state == self.regex.final:
            return True
        escape = self._escape(state)
        if not escape:
            return False
        if not pending or escape - self.avoider.alphabet_set:
            return True
        return any(
            code in escape and self.avoider.step(pending, code) == ""
            for code in self.avoider.alphabet
        )

    def live(self, pair: Pair) -> bool:
        known = self.memo.get(pair)
        if known is not None:
            return known
        if len(self.memo) >= MAX_MEMO * 10:
            self.memo.clear()
        # Breadth-first through the product until a pair known or certain to be live; every
        # pair on the path to it is live too, and a search that runs dry proves all it saw dead.
        parent: dict[Pair, Pair | None] = {pair: None}
        queue = deque([pair])
        while queue:
            here = queue.popleft()
            known = self.memo.get(here)
            if known is None and self._certain(here):
                known = True
            if known:
                step: Pair | None = here
                while step is not None:
                    self.memo[step] = True
                    step = parent[step]
                return True
            if known is False:
                continue
            state, pending = here
            for chars, targets in self.regex.edges[state]:
                for _, nxt in self.avoider.split(pending, chars):
                    for t in targets:
                        if (t, nxt) not in parent:
                            parent[(t, nxt)] = here
                            queue.append((t, nxt))
        for seen in parent:
            self.memo[seen] = False
        return False

    def keep(self, states: StateSet, pending: str) -> StateSet:
        """The states of ``states`` that are live with ``pending`` as the guard's state."""
        return frozenset(s for s in states if self.live((s, pending)))

    def any_in(self, states: StateSet, low: int, high: int) -> bool:
        """Could a character in ``[low, high]`` (not ASCII: the guard resets) lead somewhere
        live?"""
        return any(
            chars.relation(low, high) and any(self.live((t, "")) for t in targets)
            for s in states
            for chars, targets in self.regex.edges[s]
        )


class RawRegexText(Node):
    """Text (UTF-8) that the automaton matches in full and that spells no forbidden string;
    special tokens are refused (a terminator marker follows it in a ``Seq``). As
    ``RegexText``, a byte is allowed only when some continuation still completes.
    ``byte_end`` as ``BoundedText``'s: the terminator is spelled in bytes.

    Local: ``(states, phase, value, pending)``: ``RegexText``'s three, and the guard state
    (``""`` inside a multi-byte character: markers are ASCII)."""

    __slots__ = ("regex", "liveness", "byte_end")

    def __init__(
        self, regex: RegexAutomaton, forbidden: Sequence[str], *, byte_end: bool = True
    ) -> None:
        self.regex = regex
        self.liveness = Liveness(regex, Avoider(forbidden))  # raises SpellsForbidden
        self.byte_end = byte_end

    def frame(self):  # type: ignore[override]
        return (self, (self.liveness.start, UTF8_BETWEEN, 0, ""))

    def step(self, local: tuple, sym: int) -> tuple[Move, ...]:
        states, phase, value, pending = local
        ending = phase == UTF8_BETWEEN and self.regex.accepts(states)
        if 0 <= sym < SPECIAL_BASE:
            nxt = self._byte(states, phase, value, pending, sym)
            if nxt is not None:
                return ((CONSUME, nxt), (POP,)) if ending and self.byte_end else ((CONSUME, nxt),)
            return _POP if ending and self.byte_end else _NONE
        return _POP if ending else _NONE

    def _byte(
        self, states: StateSet, phase: int, value: int | None, pending: str, sym: int
    ) -> tuple | None:
        regex, liveness = self.regex, self.liveness
        if phase == UTF8_BETWEEN:
            if sym < 0x80:
                after_guard = liveness.avoider.step(pending, sym)
                if after_guard is None:
                    return None
                after = liveness.keep(regex.step(states, sym), after_guard)
                return (after, UTF8_BETWEEN, 0, after_guard) if after else None
            lead = lead_interval(sym)
            if lead is None:
                return None
            phase, low, high = lead
            return self._narrow(states, phase, sym & LEAD_BITS[REMAINING[phase]], low, high)
        low_c, high_c, after_phase = UTF8_CONTINUE[phase]
        if not low_c <= sym <= high_c:
            return None
        if value is None:  # resolved: any valid continuation
            return (states, after_phase, None if after_phase != UTF8_BETWEEN else 0, "")
        after_phase, value, low, high = continue_interval(phase, value, sym)
        return self._narrow(states, after_phase, value, low, high)

    def _narrow(
        self, states: StateSet, phase: int, value: int, low: int, high: int
    ) -> tuple | None:
        """The local after a byte that narrows a non-ASCII character to ``[low, high]``."""
        resolved = self.regex.resolve(states, low, high)
        if resolved is UNRESOLVED:
            return (states, phase, value, "") if self.liveness.any_in(states, low, high) else None
        kept = self.liveness.keep(resolved, "")
        if not kept:
            return None
        return (kept, phase, 0 if phase == UTF8_BETWEEN else None, "")
