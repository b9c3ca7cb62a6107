"""JSON grammar nodes over bytes: strings (UTF-8 checked, escapes, length bounds), numbers,
literal sets (true/false/null/enum/const), objects with declared properties, arrays, any value.

Output is valid by construction: every byte the matcher accepts keeps the text a prefix of
JSON that ``json.loads`` parses and that matches the schema the nodes were compiled from.
Whitespace between tokens is allowed but bounded (``ws`` bytes in a row) so that a model
cannot pad forever; objects list their declared properties in schema order (see schema.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from ember.models.constrain.key_trie import ROOT, ByteTrie
from ember.models.constrain.nodes import (
    BECOME,
    CONSUME,
    CONSUME_POP,
    NO_GUARD,
    POP,
    PUSH,
    SPECIAL_BASE,
    UTF8_CONTINUE,
    UTF8_LEAD,
    WHITESPACE,
    Move,
    Node,
    SubstringGuard,
)

_NONE: tuple[Move, ...] = ()
_POP: tuple[Move, ...] = ((POP,),)
_CONSUME_POP: tuple[Move, ...] = ((CONSUME_POP,),)

QUOTE, BACKSLASH, COLON, COMMA = 0x22, 0x5C, 0x3A, 0x2C
LBRACE, RBRACE, LBRACKET, RBRACKET = 0x7B, 0x7D, 0x5B, 0x5D
HEX = frozenset(b"0123456789abcdefABCDEF")
DIGITS = frozenset(b"0123456789")
SIMPLE_ESCAPES = frozenset(b'"\\/bfnrt')

# String phases.
S_OPEN, S_BODY, S_ESC = 0, 1, 2
S_HEX0, S_HEX1, S_HEX2, S_HEX3 = 3, 4, 5, 6  # after "\u" and 0..3 hex digits
S_HEX1_D = 14  # after "\uD": the next digit must keep it out of the surrogate range
# Phases 7..13: inside a multi-byte UTF-8 character (UTF8_LEAD / UTF8_CONTINUE in nodes.py).


class JString(Node):
    """A JSON string. Local: ``(phase, count, prefix, seen)``; ``count`` (characters so far) is
    kept only when a length bound needs it, ``prefix`` only while the text could still equal
    an excluded name (used for extra object keys, which then may not use escapes), ``seen``
    is the guard state against spelling a tool-call marker (see ``SubstringGuard``). The prefix
    is a node of a trie over the excluded names (``key_trie.py``): a set of every prefix of
    every name grew with the square of a name's length."""

    __slots__ = ("min_len", "max_len", "exclude", "excluded", "counting", "cap", "guard")
    initial = (S_OPEN, 0, None, b"")

    def __init__(
        self,
        min_len: int = 0,
        max_len: int | None = None,
        exclude: Sequence[bytes] = (),
        guard: SubstringGuard = NO_GUARD,
    ) -> None:
        self.guard = guard
        self.min_len = min_len
        self.max_len = max_len
        self.counting = min_len > 0 or max_len is not None
        # Past min_len only max_len still needs the count: cap it so states stay few.
        self.cap = max_len if max_len is not None else min_len
        self.exclude = bool(exclude)
        self.excluded = ByteTrie(exclude)

    def frame(self):  # type: ignore[override]
        return (self, (S_OPEN, 0, ROOT if self.exclude else None, b""))

    def _char(self, count: int) -> int:
        return min(count + 1, self.cap) if self.counting else 0

    def _room(self, count: int) -> bool:
        return self.max_len is None or count < self.max_len

    def _extend(self, prefix: int | None, sym: int) -> int | None:
        return None if prefix is None else self.excluded.child(prefix, sym)

    def step(self, local: tuple, sym: int) -> tuple[Move, ...]:
        if sym < 0 or sym >= SPECIAL_BASE:
            return _NONE
        phase, count, prefix, seen = local
        if phase != S_OPEN and self.guard.patterns:
            seen = self.guard.step(seen, sym)
            if self.guard.matched(seen):
                return _NONE
        if phase == S_BODY:
            if sym == QUOTE:
                if count >= self.min_len and (prefix is None or self.excluded.ends[prefix] is None):
                    return _CONSUME_POP
                return _NONE
            if sym == BACKSLASH:
                if self.exclude or not self._room(count):
                    return _NONE
                return ((CONSUME, (S_ESC, count, None, seen)),)
            if sym < 0x20:
                return _NONE
            if not self._room(count):
                return _NONE
            if sym < 0x80:
                return ((CONSUME, (S_BODY, self._char(count), self._extend(prefix, sym), seen)),)
            lead = UTF8_LEAD.get(sym)
            if lead is None:
                return _NONE
            return ((CONSUME, (lead, count, self._extend(prefix, sym), seen)),)
        if phase == S_OPEN:
            return ((CONSUME, (S_BODY, count, prefix, seen)),) if sym == QUOTE else _NONE
        cont = UTF8_CONTINUE.get(phase)
        if cont is not None:
            low, high, after = cont
            if not low <= sym <= high:
                return _NONE
            if after == S_BODY:
                count = self._char(count)
            return ((CONSUME, (after, count, self._extend(prefix, sym), seen)),)
        if phase == S_ESC:
            if sym in SIMPLE_ESCAPES:
                return ((CONSUME, (S_BODY, self._char(count), None, seen)),)
            return ((CONSUME, (S_HEX0, count, None, seen)),) if sym == 0x75 else _NONE
        if sym not in HEX:
            return _NONE
        if phase == S_HEX0:
            return ((CONSUME, (S_HEX1_D if sym in b"dD" else S_HEX1, count, None, seen)),)
        if phase == S_HEX1_D:
            return ((CONSUME, (S_HEX2, count, None, seen)),) if sym in b"01234567" else _NONE
        if phase == S_HEX3:
            return ((CONSUME, (S_BODY, self._char(count), None, seen)),)
        return ((CONSUME, (phase + 1, count, None, seen)),)


# Number phases.
N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP = range(9)
MAX_INT_DIGITS, MAX_FRAC_DIGITS, MAX_EXP_DIGITS = 15, 15, 2


class JNumber(Node):
    """A JSON number (or integer: no fraction, no exponent). Digit runs are capped (15 integer
    digits, 15 fraction digits, 2 exponent digits) so that every number stays exact or finite
    in a float (``1e999`` would parse as infinity) and generation cannot run on forever inside
    one number."""

    __slots__ = ("integer",)
    initial = (N_START, 0)

    def __init__(self, integer: bool) -> None:
        self.integer = integer

    def step(self, local: tuple, sym: int) -> tuple[Move, ...]:
        phase, n = local
        digit = sym in DIGITS
        if phase == N_START or phase == N_MINUS:
            if sym == 0x2D and phase == N_START:
                return ((CONSUME, (N_MINUS, 0)),)
            if sym == 0x30:
                return ((CONSUME, (N_ZERO, 0)),)
            return ((CONSUME, (N_INT, 1)),) if digit else _NONE
        if phase == N_DOT or phase == N_ESIGN:
            return ((CONSUME, (N_FRAC if phase == N_DOT else N_EXP, 1)),) if digit else _NONE
        if phase == N_E:
            if sym == 0x2B or sym == 0x2D:
                return ((CONSUME, (N_ESIGN, 0)),)
            return ((CONSUME, (N_EXP, 1)),) if digit else _NONE
        # ZERO, INT, FRAC, EXP: a complete number that may go on.
        if digit:
            cap = {N_INT: MAX_INT_DIGITS, N_FRAC: MAX_FRAC_DIGITS, N_EXP: MAX_EXP_DIGITS}.get(phase)
            if cap is not None and n < cap:
                return ((CONSUME, (phase, n + 1)),)
            return _POP
        if not self.integer:
            if sym == 0x2E and phase in (N_ZERO, N_INT):
                return ((CONSUME, (N_DOT, 0)),)
            if (sym == 0x65 or sym == 0x45) and phase in (N_ZERO, N_INT, N_FRAC):
                return ((CONSUME, (N_E, 0)),)
        return _POP


class JLiteralSet(Node):
    """One of a fixed set of byte strings: ``true``/``false``/``null``, or the compact JSON
    spellings of an ``enum``/``const``. Local: the node of a trie over the values reached by
    the bytes matched so far (``key_trie.py``: linear in the values' bytes)."""

    __slots__ = ("values", "trie")
    initial = ROOT

    def __init__(self, values: Sequence[bytes]) -> None:
        self.values = frozenset(values)
        self.trie = ByteTrie(sorted(self.values))

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        trie = self.trie
        moves: list[Move] = []
        if 0 <= sym < SPECIAL_BASE:
            longer = trie.child(local, sym)
            if longer is not None:
                if trie.ends[longer] is not None and not trie.children[longer]:
                    moves.append((CONSUME_POP,))
                else:
                    moves.append((CONSUME, longer))
        if trie.ends[local] is not None:
            moves.append((POP,))
        return tuple(moves)


# Object phases.
O_OPEN, O_FIRST, O_KEY, O_COLON, O_VALUE, O_AFTER, O_NEXT = range(7)
EXTRA = -1  # property index of an additional (undeclared) key


class JObject(Node):
    """A JSON object whose declared properties appear in schema order (each optional one may
    be skipped, each required one must appear), optionally followed by additional keys (names
    other than the declared ones) whose values match ``extra``.

    After property ``start - 1`` the next key may be any of properties ``start`` up to the
    next required one (``last[start]``). Keys are matched on one trie over every key
    (``key_trie.py``) whose nodes know the key indices beneath them, so a prefix is allowed
    when a key indexed in ``[start, last[start]]`` lies beneath it: time and space linear in
    the keys' bytes. (One prefix set per start position was quadratic in optional keys.)"""

    __slots__ = (
        "keys",
        "values",
        "required",
        "extra",
        "ws",
        "can_close",
        "trie",
        "last",
        "extra_ok",
        "extra_key",
    )
    initial = (O_OPEN,)

    def __init__(
        self,
        properties: Sequence[tuple[bytes, Node, bool]],
        extra: Node | None,
        ws: int,
        guard: SubstringGuard = NO_GUARD,
    ) -> None:
        n = len(properties)
        self.keys = tuple(p[0] for p in properties)
        self.values = tuple(p[1] for p in properties)
        self.required = tuple(p[2] for p in properties)
        self.extra = extra
        self.ws = ws
        closable = [True] * (n + 1)
        last = [n - 1] * (n + 1)
        for i in range(n - 1, -1, -1):
            closable[i] = closable[i + 1] and not self.required[i]
            last[i] = i if self.required[i] else last[i + 1]
        self.can_close = tuple(closable)
        self.last = tuple(last)
        self.extra_ok = tuple(extra is not None and self.can_close[i] for i in range(n + 1))
        self.extra_key = JString(exclude=self.keys, guard=guard) if extra is not None else None
        self.trie = ByteTrie(self.keys)

    def _start_key(self, next_idx: int, first: bool, sym: int) -> tuple[Move, ...]:
        moves: list[Move] = []
        if sym == QUOTE:
            if next_idx < len(self.keys):
                moves.append((CONSUME, (O_KEY, next_idx, ROOT)))
            if self.extra_ok[next_idx]:
                assert self.extra_key is not None
                moves.append((PUSH, (O_COLON, EXTRA, 0), self.extra_key.frame()))
        elif sym == RBRACE and first and self.can_close[0]:
            moves.append((CONSUME_POP,))
        return tuple(moves)

    def step(self, local: tuple, sym: int) -> tuple[Move, ...]:
        phase = local[0]
        if phase == O_OPEN:
            return ((CONSUME, (O_FIRST, 0)),) if sym == LBRACE else _NONE
        if phase == O_KEY:
            _, next_idx, node = local
            if not 0 <= sym < SPECIAL_BASE:
                return _NONE
            # Keys are matched in their escaped spelling, where a quote inside a key always
            # follows a backslash: so extending the prefix and closing the key never compete.
            last = self.last[next_idx]
            longer = self.trie.step(node, sym, next_idx, last)
            if longer is not None:
                return ((CONSUME, (O_KEY, next_idx, longer)),)
            if sym == QUOTE:
                j = self.trie.ends[node]
                if j is not None and next_idx <= j <= last:
                    return ((CONSUME, (O_COLON, j, 0)),)
            return _NONE
        ws = local[-1]
        if sym in WHITESPACE:
            if ws < self.ws:
                return ((CONSUME, local[:-1] + (ws + 1,)),)
            return _NONE
        if phase == O_FIRST:
            return self._start_key(0, True, sym)
        if phase == O_COLON:
            return ((CONSUME, (O_VALUE, local[1], 0)),) if sym == COLON else _NONE
        if phase == O_VALUE:
            j = local[1]
            if j == EXTRA:
                assert self.extra is not None
                return ((PUSH, (O_AFTER, len(self.keys), 0), self.extra.frame()),)
            return ((PUSH, (O_AFTER, j + 1, 0), self.values[j].frame()),)
        if phase == O_AFTER:
            next_idx = local[1]
            if sym == COMMA and (next_idx < len(self.keys) or self.extra_ok[next_idx]):
                return ((CONSUME, (O_NEXT, next_idx, 0)),)
            if sym == RBRACE and self.can_close[next_idx]:
                return _CONSUME_POP
            return _NONE
        # O_NEXT
        return self._start_key(local[1], False, sym)


# Array phases.
A_OPEN, A_FIRST, A_AFTER, A_NEXT = range(4)


class JArray(Node):
    """A JSON array of ``item`` values, ``min_items`` to ``max_items`` of them."""

    __slots__ = ("item", "min_items", "max_items", "ws")
    initial = (A_OPEN,)

    def __init__(self, item: Node, min_items: int, max_items: int | None, ws: int) -> None:
        self.item = item
        self.min_items = min_items
        self.max_items = max_items
        self.ws = ws

    def _cap(self, count: int) -> int:
        return count if self.max_items is not None else min(count, self.min_items)

    def step(self, local: tuple, sym: int) -> tuple[Move, ...]:
        phase = local[0]
        if phase == A_OPEN:
            return ((CONSUME, (A_FIRST, 0)),) if sym == LBRACKET else _NONE
        ws = local[-1]
        if sym in WHITESPACE:
            return ((CONSUME, local[:-1] + (ws + 1,)),) if ws < self.ws else _NONE
        if phase == A_FIRST:
            moves: list[Move] = []
            if sym == RBRACKET and self.min_items == 0:
                moves.append((CONSUME_POP,))
            elif self.max_items != 0:
                moves.append((PUSH, (A_AFTER, self._cap(1), 0), self.item.frame()))
            return tuple(moves)
        count = local[1]
        if phase == A_AFTER:
            if sym == COMMA and (self.max_items is None or count < self.max_items):
                return ((CONSUME, (A_NEXT, count, 0)),)
            if sym == RBRACKET and count >= self.min_items:
                return _CONSUME_POP
            return _NONE
        # A_NEXT
        return ((PUSH, (A_AFTER, self._cap(count + 1), 0), self.item.frame()),)


class JAny(Node):
    """Any JSON value (``json_object`` mode, or a schema that says nothing)."""

    __slots__ = ("dispatch",)

    def __init__(self, ws: int, guard: SubstringGuard = NO_GUARD) -> None:
        any_object = JObject((), extra=self, ws=ws, guard=guard)
        any_array = JArray(self, 0, None, ws)
        number = JNumber(integer=False)
        literals = JLiteralSet((b"true", b"false", b"null"))
        self.dispatch: dict[int, tuple[Move, ...]] = {
            LBRACE: ((BECOME, any_object.frame()),),
            LBRACKET: ((BECOME, any_array.frame()),),
            QUOTE: ((BECOME, JString(guard=guard).frame()),),
        }
        for byte in b"-0123456789":
            self.dispatch[byte] = ((BECOME, number.frame()),)
        for byte in b"tfn":
            self.dispatch[byte] = ((BECOME, literals.frame()),)

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        return self.dispatch.get(sym, _NONE)
