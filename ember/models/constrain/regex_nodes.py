"""Grammar nodes that match a regex automaton byte by byte: ``RegexText`` (the text itself is
the match, UTF-8 encoded: SGLang's ``regex``) and ``JRegexString`` (a JSON string whose
*decoded* value is the match: JSON Schema's ``pattern``).

The automaton works on code points; these nodes decode bytes into code points as they come.
Mid-character, the bytes so far pin the code point to an interval (UTF-8 keeps code point order;
so do the hex digits of a ``\\uXXXX`` escape). A byte is allowed only when some code point in
the new interval is still accepted, so no prefix leads to a dead end. Once every code point in
the interval leads to the same next set, the exact value is dropped (the local keeps only the
phase, as JString's does): inside ``.*`` a CJK character costs no more states than an ASCII one.

Locals: ``RegexText``: ``(states, phase, value)``; ``JRegexString``: ``(phase, states, value,
seen)``. ``phase`` is between characters, or which byte of a UTF-8 character / escape
comes next; ``value`` is ``None`` once resolved (``states`` is then the set *after* the
character), else the bits read so far (``states`` still the set before it).
"""

from __future__ import annotations

from ember.models.constrain.nodes import (
    CONSUME,
    CONSUME_POP,
    NO_GUARD,
    POP,
    SPECIAL_BASE,
    U1,
    U2,
    U2_E0,
    U2_ED,
    U3,
    U3_F0,
    U3_F4,
    UTF8_BETWEEN,
    UTF8_CONTINUE,
    UTF8_LEAD,
    Move,
    Node,
    SubstringGuard,
)
from ember.models.constrain.regex_nfa import UNRESOLVED, RegexAutomaton, StateSet

_NONE: tuple[Move, ...] = ()
_POP: tuple[Move, ...] = ((POP,),)
REMAINING = {U1: 1, U2: 2, U2_E0: 2, U2_ED: 2, U3: 3, U3_F0: 3, U3_F4: 3}
LEAD_BITS = {1: 0x1F, 2: 0x0F, 3: 0x07}

# JSON-string phases (the UTF-8 ones, 7..13, are shared with nodes.py).
J_OPEN, J_BODY, J_ESC = 0, 1, 2
J_HEX = (3, 4, 5, 6)  # after "\u" and 0..3 hex digits
QUOTE, BACKSLASH = 0x22, 0x5C
SHORT_ESCAPES = {0x22: 0x22, 0x5C: 0x5C, 0x2F: 0x2F, 0x62: 8, 0x66: 12, 0x6E: 10, 0x72: 13, 0x74: 9}
HEX_VALUE = {b: int(chr(b), 16) for b in b"0123456789abcdefABCDEF"}


def lead_interval(lead: int) -> tuple[int, int, int] | None:
    """For a UTF-8 lead byte: ``(phase, low, high)``, the code points it can start (exactly
    the valid ones: no overlongs, no surrogates), or None for a byte that cannot lead."""
    phase = UTF8_LEAD.get(lead)
    if phase is None:
        return None
    rest = REMAINING[phase]
    low_c, high_c, _ = UTF8_CONTINUE[phase]
    value = lead & LEAD_BITS[rest]
    free = 6 * (rest - 1)
    low = ((value << 6) | (low_c & 0x3F)) << free
    high = (((value << 6) | (high_c & 0x3F)) << free) | ((1 << free) - 1)
    return phase, low, high


def continue_interval(phase: int, value: int, byte: int) -> tuple[int, int, int, int]:
    """After continuation ``byte`` in ``phase`` with ``value`` read so far: ``(next_phase,
    new_value, low, high)``; ``next_phase`` is ``UTF8_BETWEEN`` when the character is done."""
    after = UTF8_CONTINUE[phase][2]
    value = (value << 6) | (byte & 0x3F)
    free = 6 * (REMAINING[phase] - 1)
    return after, value, value << free, (value << free) | ((1 << free) - 1)


class RegexText(Node):
    """Text (UTF-8) that the automaton matches in full; special tokens are refused."""

    __slots__ = ("regex",)

    def __init__(self, regex: RegexAutomaton) -> None:
        self.regex = regex

    def frame(self):  # type: ignore[override]
        return (self, (self.regex.start, UTF8_BETWEEN, 0))

    def step(self, local: tuple, sym: int) -> tuple[Move, ...]:
        states, phase, value = local
        regex = self.regex
        ending = phase == UTF8_BETWEEN and regex.accepts(states)
        if sym < 0 or sym >= SPECIAL_BASE:
            return _POP if ending else _NONE
        nxt = self._byte(states, phase, value, sym)
        if nxt is None:
            return _POP if ending else _NONE
        return ((CONSUME, nxt), (POP,)) if ending else ((CONSUME, nxt),)

    def _byte(self, states: StateSet, phase: int, value: int | None, sym: int) -> tuple | None:
        regex = self.regex
        if phase == UTF8_BETWEEN:
            if sym < 0x80:
                after = regex.step(states, sym)
                return (after, UTF8_BETWEEN, 0) if after else None
            lead = lead_interval(sym)
            if lead is None:
                return None
            phase, low, high = lead
            return _interval(regex, states, phase, sym & LEAD_BITS[REMAINING[phase]], low, high)
        low_c, high_c, after_phase = UTF8_CONTINUE[phase]
        if not low_c <= sym <= high_c:
            return None
        if value is None:  # resolved: any valid continuation
            return (states, after_phase, None if after_phase != UTF8_BETWEEN else 0)
        after_phase, value, low, high = continue_interval(phase, value, sym)
        return _interval(regex, states, after_phase, value, low, high)


def _interval(
    regex: RegexAutomaton, states: StateSet, phase: int, value: int, low: int, high: int
) -> tuple | None:
    """The raw-text local after a byte that narrows the character to ``[low, high]``."""
    resolved = regex.resolve(states, low, high)
    if resolved is UNRESOLVED:
        return (states, phase, value)
    if not resolved:
        return None
    return (resolved, phase, 0 if phase == UTF8_BETWEEN else None)


class JRegexString(Node):
    """A JSON string (quotes included) whose decoded value the automaton matches in full.

    Each character may be written raw (UTF-8; never ``"``, ``\\`` or a control character),
    with a short escape (``\\"`` ``\\\\`` ``\\/`` ``\\b`` ``\\f`` ``\\n`` ``\\r`` ``\\t``) or as
    ``\\uXXXX`` (not surrogates, as JString). Length bounds are compiled into the automaton
    (``compile_regex(length=...)``), so that they and the pattern are met together.
    """

    __slots__ = ("regex", "guard")

    def __init__(self, regex: RegexAutomaton, guard: SubstringGuard = NO_GUARD) -> None:
        self.regex = regex
        self.guard = guard

    def frame(self):  # type: ignore[override]
        return (self, (J_OPEN, self.regex.start, 0, b""))

    def step(self, local: tuple, sym: int) -> tuple[Move, ...]:
        if sym < 0 or sym >= SPECIAL_BASE:
            return _NONE
        phase, states, value, seen = local
        if phase == J_OPEN:
            return ((CONSUME, (J_BODY, states, 0, seen)),) if sym == QUOTE else _NONE
        if self.guard.patterns:
            seen = self.guard.step(seen, sym)
            if self.guard.matched(seen):
                return _NONE
        nxt = self._byte(phase, states, value, sym)
        if nxt is None:
            return _NONE
        if nxt == "close":
            return ((CONSUME_POP,),)
        return ((CONSUME, (*nxt, seen)),)

    def _byte(self, phase: int, states: StateSet, value: int | None, sym: int):  # noqa: ANN202
        regex = self.regex
        if phase == J_BODY:
            if sym == QUOTE:
                return "close" if regex.accepts(states) else None
            if sym < 0x20:
                return None
            if sym == BACKSLASH:
                # Every BMP character has a \u spelling, so an escape can go on whenever the
                # automaton takes some BMP character here.
                return (J_ESC, states, 0) if regex.allows_any(states, 0, 0xFFFF) else None
            if sym < 0x80:
                after = regex.step(states, sym)
                return (J_BODY, after, 0) if after else None
            lead = lead_interval(sym)
            if lead is None:
                return None
            phase, low, high = lead
            bits = sym & LEAD_BITS[REMAINING[phase]]
            return self._narrow(states, phase, bits, low, high)
        if phase == J_ESC:
            if sym in SHORT_ESCAPES:
                after = regex.step(states, SHORT_ESCAPES[sym])
                return (J_BODY, after, 0) if after else None
            if sym == 0x75:  # "u": four hex digits follow
                return (J_HEX[0], states, 0)
            return None
        if phase in J_HEX:
            digit = HEX_VALUE.get(sym)
            if digit is None:
                return None
            read = phase - J_HEX[0] + 1  # hex digits read, this one included
            if value is None:  # resolved: any digit completes the same character
                return (J_BODY, states, 0) if read == 4 else (phase + 1, states, None)
            value = (value << 4) | digit
            free = 4 * (4 - read)
            low, high = value << free, (value << free) | ((1 << free) - 1)
            if 0xD800 <= low and high <= 0xDFFF:
                return None  # only surrogates left (refused, as JString)
            nxt_phase = J_BODY if read == 4 else phase + 1
            # Resolve only when no surrogate is inside: then every later digit is allowed.
            straddles = low <= 0xDFFF and high >= 0xD800
            resolved = UNRESOLVED if straddles else regex.resolve(states, low, high)
            if resolved is UNRESOLVED:
                return (nxt_phase, states, value) if regex.allows_any(states, low, high) else None
            if not resolved:
                return None
            return (J_BODY, resolved, 0) if read == 4 else (nxt_phase, resolved, None)
        # Inside a UTF-8 character.
        low_c, high_c, after_phase = UTF8_CONTINUE[phase]
        if not low_c <= sym <= high_c:
            return None
        if value is None:
            return (
                (J_BODY, states, 0) if after_phase == UTF8_BETWEEN else (after_phase, states, None)
            )
        after_phase, value, low, high = continue_interval(phase, value, sym)
        return self._narrow(states, after_phase, value, low, high)

    def _narrow(self, states: StateSet, phase: int, value: int, low: int, high: int):  # noqa: ANN202
        resolved = self.regex.resolve(states, low, high)
        if resolved is UNRESOLVED:
            return (phase, states, value)
        if not resolved:
            return None
        return (J_BODY, resolved, 0) if phase == UTF8_BETWEEN else (phase, resolved, None)
