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


class FreeText(Node):
    """Any bytes up to and including a terminator (a ``</think>`` or ``</arg_value>``).

    The local is how many bytes of the terminator's text have just been seen (a KMP state).
    When the terminator is a special token, that token ends the text and its spelling as
    plain bytes is refused, so the token stream stays canonical and a text parser that
    splits on the marker's spelling agrees with the grammar.
    """

    __slots__ = ("term", "term_sym", "fail")

    def __init__(self, terminator: str, term_token_id: int | None) -> None:
        self.term = terminator.encode()
        self.term_sym = None if term_token_id is None else SPECIAL_BASE + term_token_id
        self.fail = _kmp_failure(self.term)

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        if sym >= SPECIAL_BASE:
            return _CONSUME_POP if sym == self.term_sym else _NONE
        if sym < 0:
            return _NONE
        term = self.term
        k = local
        while k and term[k] != sym:
            k = self.fail[k - 1]
        if term[k] == sym:
            k += 1
        if k == len(term):
            return _CONSUME_POP if self.term_sym is None else _NONE
        return ((CONSUME, k),)


def _kmp_failure(pattern: bytes) -> tuple[int, ...]:
    fail = [0] * len(pattern)
    k = 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = fail[k - 1]
        if pattern[i] == pattern[k]:
            k += 1
        fail[i] = k
    return tuple(fail)


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
