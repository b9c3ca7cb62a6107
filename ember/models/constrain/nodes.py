"""Grammar nodes: the pieces a constrained-decoding grammar is built from.

A grammar is a tree (or, through ``Ref``, a graph) of immutable nodes. Matching runs a
pushdown machine whose stack holds *frames* ``(node, local)``: ``local`` is a small hashable
value the node uses to remember where it is (a position in a literal, a phase of an object).
A node never holds per-request state, so one compiled grammar serves every request that asks
for the same schema, and a matcher state (a set of stacks) is a plain hashable value that
can key caches.

Input symbols are ints: ``0..255`` are bytes, ``SPECIAL_BASE + token_id`` is a special token
(a tool-call marker such as ``<|tool_call_begin|>`` that the tokenizer keeps whole), and
``END`` asks "may the output stop here?".

``Node.step(local, sym)`` answers with a tuple of *moves* (several moves = nondeterminism,
which the driver in grammar.py explores in parallel):

- ``(CONSUME, new_local)``: ``sym`` is taken, the node stays on top with ``new_local``;
- ``(CONSUME_POP,)``: ``sym`` is taken and the node is complete;
- ``(PUSH, cont_local, frame)``: without taking ``sym``, the node sets its own local to
  ``cont_local`` (where it resumes once the child completes) and pushes ``frame``, which then
  sees ``sym``;
- ``(BECOME, frame)``: without taking ``sym``, the node is replaced by ``frame``;
- ``(POP,)``: the node is complete without taking ``sym``; its parent sees ``sym``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

SPECIAL_BASE = 256
END = -1

CONSUME = 0
CONSUME_POP = 1
PUSH = 2
BECOME = 3
POP = 4

Move = tuple
Frame = tuple  # (Node, local)

_POP: tuple[Move, ...] = ((POP,),)
_CONSUME_POP: tuple[Move, ...] = ((CONSUME_POP,),)
_NONE: tuple[Move, ...] = ()

WHITESPACE = frozenset(b" \t\n\r")

# UTF-8 validation, shared by JSON strings and free text. Phase 1: between characters;
# phases 7..13: inside a multi-byte character, waiting for continuation bytes in a range
# (the narrow first ranges exclude overlong forms, surrogates, and code points past U+10FFFF).
UTF8_BETWEEN = 1
U1, U2, U2_E0, U2_ED, U3, U3_F0, U3_F4 = 7, 8, 9, 10, 11, 12, 13
UTF8_LEAD = {b: U1 for b in range(0xC2, 0xE0)}
UTF8_LEAD.update({b: U2 for b in (*range(0xE1, 0xED), 0xEE, 0xEF)})
UTF8_LEAD.update({0xE0: U2_E0, 0xED: U2_ED, 0xF0: U3_F0, 0xF4: U3_F4})
UTF8_LEAD.update({b: U3 for b in range(0xF1, 0xF4)})
UTF8_CONTINUE = {
    U1: (0x80, 0xBF, UTF8_BETWEEN),
    U2: (0x80, 0xBF, U1),
    U2_E0: (0xA0, 0xBF, U1),
    U2_ED: (0x80, 0x9F, U1),
    U3: (0x80, 0xBF, U2),
    U3_F0: (0x90, 0xBF, U2),
    U3_F4: (0x80, 0x8F, U2),
}


class Node:
    """Base class. Subclasses set ``initial`` and implement ``step``."""

    __slots__ = ()
    initial: Hashable = 0

    def step(self, local: Hashable, sym: int) -> tuple[Move, ...]:
        raise NotImplementedError

    def frame(self) -> Frame:
        return (self, self.initial)


class Literal(Node):
    """An exact byte string (local: how many bytes matched so far)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        data = self.data
        if local == len(data):
            return _POP
        if sym == data[local]:
            if local + 1 == len(data):
                return _CONSUME_POP
            return ((CONSUME, local + 1),)
        return _NONE

    def __repr__(self) -> str:
        return f"Literal({self.data!r})"


class Special(Node):
    """One special token, e.g. ``<|tool_call_begin|>`` kept whole by the tokenizer."""

    __slots__ = ("sym", "text")

    def __init__(self, token_id: int, text: str) -> None:
        self.sym = SPECIAL_BASE + token_id
        self.text = text

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        return _CONSUME_POP if sym == self.sym else _NONE

    def __repr__(self) -> str:
        return f"Special({self.text!r})"


class Seq(Node):
    """Items one after another (local: index of the next item)."""

    __slots__ = ("items",)

    def __init__(self, items: Sequence[Node]) -> None:
        self.items = tuple(items)

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        if local == len(self.items):
            return _POP
        return ((PUSH, local + 1, self.items[local].frame()),)


class Choice(Node):
    """Any one of the alternatives (explored in parallel until the input decides)."""

    __slots__ = ("moves",)

    def __init__(self, alternatives: Sequence[Node]) -> None:
        self.moves = tuple((BECOME, alt.frame()) for alt in alternatives)

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        return self.moves


class Maybe(Node):
    """The item or nothing."""

    __slots__ = ("moves",)

    def __init__(self, item: Node) -> None:
        self.moves = ((BECOME, item.frame()), (POP,))

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        return self.moves


class Repeat(Node):
    """``item`` between ``minimum`` and ``maximum`` times (None: unbounded), with an optional
    separator before every item but the first. The local counts items, capped where the
    exact number no longer matters so that unbounded repetition keeps few distinct states."""

    __slots__ = ("item", "minimum", "maximum", "with_separator")

    def __init__(
        self,
        item: Node,
        minimum: int = 0,
        maximum: int | None = None,
        separator: Node | None = None,
    ) -> None:
        self.item = item
        self.minimum = minimum
        self.maximum = maximum
        self.with_separator = Seq([separator, item]) if separator is not None else None

    def _cap(self, count: int) -> int:
        if self.maximum is not None:
            return count
        return min(count, max(self.minimum, 1))

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        moves: list[Move] = []
        if local >= self.minimum:
            moves.append((POP,))
        if self.maximum is None or local < self.maximum:
            body = self.with_separator if (local > 0 and self.with_separator) else self.item
            moves.append((PUSH, self._cap(local + 1), body.frame()))
        return tuple(moves)


class Whitespace(Node):
    """Zero to ``maximum`` whitespace bytes (bounded so a model cannot pad forever)."""

    __slots__ = ("maximum",)

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        if sym in WHITESPACE and local < self.maximum:
            return ((CONSUME, local + 1),)
        return _POP


class SubstringGuard:
    """Watches text for a few byte patterns (tool-call markers): the state is the longest
    suffix of the text so far that is a prefix of some pattern (an Aho-Corasick state kept as
    bytes). Free text inside a tool call must not spell a marker, or a text parser would see
    the marker there."""

    __slots__ = ("patterns", "prefixes", "first", "cache")

    def __init__(self, patterns: Sequence[bytes]) -> None:
        self.patterns = frozenset(p for p in patterns if p)
        self.prefixes = frozenset(p[:i] for p in self.patterns for i in range(len(p) + 1))
        self.first = frozenset(p[0] for p in self.patterns)
        self.cache: dict[tuple[bytes, int], bytes] = {}

    def step(self, state: bytes, byte: int) -> bytes:
        if not state and byte not in self.first:
            return b""
        key = (state, byte)
        found = self.cache.get(key)
        if found is None:
            text = state + bytes((byte,))
            while text not in self.prefixes:
                text = text[1:]
            self.cache[key] = found = text
        return found

    def matched(self, state: bytes) -> bool:
        return state in self.patterns


NO_GUARD = SubstringGuard(())


class FreeText(Node):
    """Any UTF-8 text up to and including a terminator (a ``</think>`` or ``</arg_value>``),
    never spelling one of the ``forbidden`` markers.

    The local is ``(seen, utf8)``: the guard state over the terminator and the forbidden
    markers, and the UTF-8 phase. When the terminator is a special token, that token ends the
    text and its spelling as plain bytes is refused, so the token stream stays canonical and
    a text parser that splits on the marker's spelling agrees with the grammar.
    """

    __slots__ = ("term", "term_sym", "guard")
    initial = (b"", UTF8_BETWEEN)

    def __init__(
        self, terminator: str, term_token_id: int | None, forbidden: Sequence[str] = ()
    ) -> None:
        self.term = terminator.encode()
        self.term_sym = None if term_token_id is None else SPECIAL_BASE + term_token_id
        self.guard = SubstringGuard([self.term, *(f.encode() for f in forbidden)])

    def step(self, local: tuple[bytes, int], sym: int) -> tuple[Move, ...]:
        seen, utf8 = local
        if sym >= SPECIAL_BASE:
            return _CONSUME_POP if sym == self.term_sym and utf8 == UTF8_BETWEEN else _NONE
        if sym < 0:
            return _NONE
        if utf8 != UTF8_BETWEEN:
            low, high, after = UTF8_CONTINUE[utf8]
            return ((CONSUME, (b"", after)),) if low <= sym <= high else _NONE
        if sym >= 0x80:
            lead = UTF8_LEAD.get(sym)
            return _NONE if lead is None else ((CONSUME, (b"", lead)),)
        seen = self.guard.step(seen, sym)
        if self.guard.matched(seen):
            return _CONSUME_POP if seen == self.term and self.term_sym is None else _NONE
        return ((CONSUME, (seen, UTF8_BETWEEN)),)


class BoundedText(Node):
    """UTF-8 text of ``min_len`` to ``max_len`` characters (code points, as JSON Schema counts)
    that never spells one of the ``guard``'s patterns, for a terminator that follows it in a
    ``Seq``: the text may end (its parent goes on) only once ``min_len`` characters are in, and
    must end once ``max_len`` are. Special tokens are never text. ``byte_end``: the terminator
    is spelled in bytes, so a byte may end the text too (with a special-token terminator, ending
    on a byte is a branch that always dies, and costs every step).

    The local is ``(count, utf8, seen)``: characters so far (capped where the exact number no
    longer matters, as JString's), the UTF-8 phase, the guard state. The guard only refuses the
    byte that would complete a pattern, so some other character can always come instead: no
    state is a dead end.
    """

    __slots__ = ("min_len", "max_len", "cap", "guard", "byte_end")
    initial = (0, UTF8_BETWEEN, b"")

    def __init__(
        self, min_len: int, max_len: int | None, guard: SubstringGuard, *, byte_end: bool = True
    ) -> None:
        self.min_len = min_len
        self.max_len = max_len
        self.cap = max_len if max_len is not None else min_len
        self.guard = guard
        self.byte_end = byte_end

    def step(self, local: tuple[int, int, bytes], sym: int) -> tuple[Move, ...]:
        count, utf8, seen = local
        ending = utf8 == UTF8_BETWEEN and count >= self.min_len
        if 0 <= sym < SPECIAL_BASE:
            nxt = self._byte(count, utf8, seen, sym)
            if nxt is not None:
                return ((CONSUME, nxt), (POP,)) if ending and self.byte_end else ((CONSUME, nxt),)
            return _POP if ending and self.byte_end else _NONE
        return _POP if ending else _NONE

    def _byte(self, count: int, utf8: int, seen: bytes, sym: int) -> tuple | None:
        if utf8 != UTF8_BETWEEN:
            low, high, after = UTF8_CONTINUE[utf8]
            if not low <= sym <= high:
                return None
            return (min(count + 1, self.cap) if after == UTF8_BETWEEN else count, after, b"")
        if self.max_len is not None and count >= self.max_len:
            return None
        if sym >= 0x80:
            lead = UTF8_LEAD.get(sym)
            return None if lead is None else (count, lead, b"")
        seen = self.guard.step(seen, sym)
        if self.guard.matched(seen):
            return None
        return (min(count + 1, self.cap), UTF8_BETWEEN, seen)


class Ref(Node):
    """A forward reference (``$ref``), bound once the target is compiled."""

    __slots__ = ("target", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.target: Node | None = None

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        assert self.target is not None, f"unbound reference {self.name}"
        return ((BECOME, self.target.frame()),)


class Marker:
    """Resolves a marker's text against a vocabulary: the special token when the tokenizer
    has one spelled that way, else the literal bytes."""

    def __init__(self, special_ids: dict[str, int]) -> None:
        self.special_ids = special_ids

    def __call__(self, text: str) -> Node:
        token_id = self.special_ids.get(text)
        if token_id is not None:
            return Special(token_id, text)
        return Literal(text.encode())

    def token_id(self, text: str) -> int | None:
        return self.special_ids.get(text)
