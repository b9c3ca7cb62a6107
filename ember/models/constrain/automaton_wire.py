"""A regex automaton (``RegexAutomaton``) as JSON, for the compile worker's pipe
(compile_worker.py).

Its input is request data and so hostile: nothing crosses the pipe as pickle, only JSON text
that this module checks as it reads it. The edges are two tables of the distinct ``CharSet``s
(a pattern's few classes, as JSON lists) and target sets, and per state a row of
``charset, targets, charset, targets, ...`` indexes into them. The rows and the sets travel as
base64 of little-endian uint32 arrays (``offsets`` into a ``flat`` array), decoded by C code in
one go; a state's edges are then built when a matcher first reaches it (``LazyEdges``), each
``CharSet`` and target set once and shared by the states that use it, as the builder shares
them. Reading a 48,000-state automaton so costs about a millisecond, where building it took
130 ms (BENCHMARKS.md); a matcher reaches a few of its states.

    fields = automaton_fields(compile_regex("^[a-z]{2,8}$"))
    automaton = decode_automaton(json.loads(json.dumps(fields)))
"""

from __future__ import annotations

import base64
import sys
from array import array
from collections.abc import Iterator, Sequence

from ember.errors import ProtocolError
from ember.models.constrain.charset import CharSet
from ember.models.constrain.regex_nfa import RegexAutomaton, StateSet
from ember.models.constrain.regex_syntax import RegexError

Edges = tuple[tuple[CharSet, StateSet], ...]


def _packed(values: list[int]) -> str:
    out = array("I", values)
    if sys.byteorder == "big":
        out.byteswap()
    return base64.b64encode(out.tobytes()).decode("ascii")


def _unpacked(text: object) -> array:
    _need(isinstance(text, str))
    out = array("I")
    out.frombytes(base64.b64decode(text, validate=True))  # type: ignore[arg-type]
    if sys.byteorder == "big":
        out.byteswap()
    return out


class LazyEdges(Sequence[Edges]):
    """``RegexAutomaton.edges`` decoded a state at a time, on first use (thread-safe: two
    threads decoding one state build equal rows, and either is kept)."""

    __slots__ = ("_offsets", "_flat", "_charsets", "_set_offsets", "_set_flat", "_rows", "_sets")

    def __init__(
        self,
        offsets: array,
        flat: array,
        charsets: list[CharSet],
        set_offsets: array,
        set_flat: array,
    ) -> None:
        self._offsets, self._flat, self._charsets = offsets, flat, charsets
        self._set_offsets, self._set_flat = set_offsets, set_flat
        self._rows: list[Edges | None] = [None] * (len(offsets) - 1)
        self._sets: list[StateSet | None] = [None] * (len(set_offsets) - 1)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, state: int) -> Edges:  # type: ignore[override]
        row = self._rows[state]  # IndexError past the end, as a tuple's
        if row is None:
            state %= len(self._rows)
            flat, charsets = self._flat, self._charsets
            low, high = self._offsets[state], self._offsets[state + 1]
            row = tuple((charsets[flat[i]], self._set(flat[i + 1])) for i in range(low, high, 2))
            self._rows[state] = row
        return row

    def __iter__(self) -> Iterator[Edges]:
        return (self[state] for state in range(len(self._rows)))

    def _set(self, index: int) -> StateSet:
        found = self._sets[index]
        if found is None:
            low, high = self._set_offsets[index], self._set_offsets[index + 1]
            found = self._sets[index] = frozenset(self._set_flat[low:high])
        return found


def automaton_fields(automaton: RegexAutomaton) -> dict:
    """The automaton as plain JSON values (see the module docstring)."""
    charsets: dict[CharSet, int] = {}
    sets: dict[StateSet, int] = {}
    offsets, flat = [0], []
    for edges in automaton.edges:
        for chars, targets in edges:
            flat.append(charsets.setdefault(chars, len(charsets)))
            flat.append(sets.setdefault(targets, len(sets)))
        offsets.append(len(flat))
    set_offsets, set_flat = [0], []
    for targets in sets:
        set_flat.extend(sorted(targets))
        set_offsets.append(len(set_flat))
    return {
        "pattern": automaton.pattern,
        "start": sorted(automaton.start),
        "final": automaton.final,
        "work": automaton.work,
        "charsets": [[v for pair in chars.ranges for v in pair] for chars in charsets],
        "offsets": _packed(offsets),
        "flat": _packed(flat),
        "set_offsets": _packed(set_offsets),
        "set_flat": _packed(set_flat),
    }


def decode_automaton(fields: object) -> RegexAutomaton:
    """The automaton ``automaton_fields`` gave; raises ``ProtocolError`` for anything else.
    Every index is checked against its table here (in C: ``max``, ``sorted``, ``translate``),
    and every row's offsets are even and in order, so no later lookup fails (an odd or
    decreasing offset failed with IndexError on the engine thread: review39)."""
    try:
        _need(isinstance(fields, dict))
        assert isinstance(fields, dict)  # for the type checker; _need raised otherwise
        pattern, final, work = fields["pattern"], fields["final"], fields["work"]
        _need(isinstance(pattern, str) and type(final) is int and type(work) is int)
        charsets = [CharSet(zip(r[0::2], r[1::2], strict=True)) for r in fields["charsets"]]
        offsets, flat = _unpacked(fields["offsets"]), _unpacked(fields["flat"])
        set_offsets, set_flat = _unpacked(fields["set_offsets"]), _unpacked(fields["set_flat"])
        n, sets = len(offsets) - 1, len(set_offsets) - 1
        start = frozenset(_ints(fields["start"]))
        _need(n > 0 and 0 <= final < n and sets >= 0 and all(0 <= s < n for s in start))
        _need(offsets[0] == 0 and offsets[-1] == len(flat) and _ascending(offsets))
        _need(_all_even(offsets))  # a row is pairs (charset, targets)
        _need(set_offsets[0] == 0 and set_offsets[-1] == len(set_flat))
        _need(_ascending(set_offsets) and work >= n)
        _need(not flat or (max(flat[0::2]) < len(charsets) and max(flat[1::2]) < sets))
        _need(not set_flat or max(set_flat) < n)
    except (KeyError, TypeError, IndexError, ValueError) as error:
        raise ProtocolError(f"the compile worker sent a malformed automaton ({error!r})") from None
    edges = LazyEdges(offsets, flat, charsets, set_offsets, set_flat)
    return RegexAutomaton(pattern, start, final, edges, work)


def _ascending(values: array) -> bool:
    """No value below the one before it (sorting sorted input is one pass, in C)."""
    return values == array(values.typecode, sorted(values))


# The bytes whose value is even: deleted, what is left of the low bytes is odd.
_EVEN_BYTES = bytes(range(0, 256, 2))


def _all_even(values: array) -> bool:
    low = 0 if sys.byteorder == "little" else values.itemsize - 1
    return not values.tobytes()[low :: values.itemsize].translate(None, _EVEN_BYTES)


def _need(condition: bool) -> None:
    # Not ``assert``: the check must hold under ``python -O`` too.
    if not condition:
        raise ValueError("not the shape automaton_fields gives")


def _ints(values: object) -> list[int]:
    _need(isinstance(values, list) and all(type(v) is int for v in values))  # type: ignore[union-attr]
    return values  # type: ignore[return-value]


def regex_error_fields(error: RegexError) -> dict:
    return {
        "construct": error.construct,
        "offset": error.offset,
        "pattern": error.pattern,
        "reason": error.reason,
    }


def decode_regex_error(fields: object) -> RegexError:
    """The ``RegexError`` the worker raised, as ``compile_regex`` in this process raises it."""
    try:
        _need(isinstance(fields, dict))
        assert isinstance(fields, dict)
        construct, offset = fields["construct"], fields["offset"]
        pattern, reason = fields["pattern"], fields["reason"]
        _need(isinstance(construct, str) and type(offset) is int)
        _need(isinstance(pattern, str) and isinstance(reason, str))
    except (KeyError, ValueError) as error:
        raise ProtocolError(f"the compile worker sent a malformed refusal ({error!r})") from None
    return RegexError(construct, offset, pattern, reason)
