"""Regular-expression syntax: a pattern string to a small tree of ``Chars``, ``Concat``, ``Alt``
and ``Repeat`` (``Anchor`` only at the ends: regex_anchors.py).

The subset is the one regex users of constrained decoding write (SGLang's and vLLM's ``regex``,
JSON Schema's ``pattern``, pydantic's ``constr(pattern=...)``): literals and escapes, ``.``,
classes with ranges and negation, ``\\d \\w \\s \\D \\W \\S``, ``\\xHH``, ``\\uXXXX``,
``\\u{...}``, ``\\UXXXXXXXX``, quantifiers ``? * + {n} {n,} {n,m} {,m}`` (lazy forms accepted:
they match the same strings), groups ``( )``, ``(?: )``, named groups ``(?P<n> )`` /
``(?<n> )``, alternation, and ``^`` / ``$`` / ``\\A`` / ``\\Z`` at the ends. Classes are Python's
``re.ASCII`` ones; ``.`` is any character but a newline (Python, Rust's regex, outlines).

Anything else (backreferences, lookaround, word boundaries, inline flags, possessive and atomic
forms, Unicode properties) raises ``RegexError`` naming the construct and its offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.errors import UserError
from ember.models.constrain.charset import (
    DIGIT,
    MAX_CODE_POINT,
    NOT_DIGIT,
    NOT_NEWLINE,
    NOT_SPACE,
    NOT_WORD,
    SPACE,
    WORD,
    CharSet,
)
from ember.models.constrain.regex_work import UNITS_PER_BAR, UNITS_PER_RANGE, WorkCounter

MAX_REPEAT = 1000  # the largest count in {n,m}; bigger ones are refused, not expanded
# How deep groups may nest. The parser, the automaton builder and the forbidden-marker pass all
# recurse per level: 5,000 nested groups ran out of Python's stack (RecursionError, answered as
# an internal error). No pattern a person or a schema writes nests anywhere near this.
MAX_GROUP_DEPTH = 100


class RegexError(UserError):
    """A pattern ember cannot compile: ``construct`` names what, ``offset`` where (0-based)."""

    def __init__(self, construct: str, offset: int, pattern: str, reason: str = "") -> None:
        self.construct = construct
        self.offset = offset
        self.pattern = pattern
        self.reason = reason  # kept: the compile worker sends it back (automaton_wire.py)
        detail = f" ({reason})" if reason else ""
        super().__init__(f"{construct} at offset {offset}{detail}")


@dataclass(frozen=True, slots=True)
class Chars:
    chars: CharSet


@dataclass(frozen=True, slots=True)
class Concat:
    items: tuple[Regex, ...]


@dataclass(frozen=True, slots=True)
class Alt:
    items: tuple[Regex, ...]


@dataclass(frozen=True, slots=True)
class Repeat:
    item: Regex
    minimum: int
    maximum: int | None  # None: unbounded
    offset: int  # where the quantifier is written (for size errors)


@dataclass(frozen=True, slots=True)
class Anchor:
    kind: str  # "start" or "end"
    offset: int


Regex = Chars | Concat | Alt | Repeat | Anchor
EMPTY = Concat(())

# Made once: a pattern of many ``\W`` made a complement apiece (4 µs a character).
_CLASS_ESCAPES = {
    "d": DIGIT,
    "w": WORD,
    "s": SPACE,
    "D": NOT_DIGIT,
    "W": NOT_WORD,
    "S": NOT_SPACE,
}
_CHAR_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B, "a": 0x07}
_UNSUPPORTED_ESCAPES = {
    "b": "word boundary \\b",
    "B": "word boundary \\B",
    "k": "backreference \\k",
    "p": "Unicode property \\p",
    "P": "Unicode property \\P",
    "c": "control escape \\c",
    "G": "\\G",
    "z": "\\z",
}


class _Parser:
    def __init__(self, pattern: str, work: WorkCounter | None) -> None:
        self.text = pattern
        self.pos = 0
        self.depth = 0  # groups open at pos
        self.work = work  # charged each class's ranges (the characters were, before the parse)
        # One set per code point written as a literal: a set apiece cost a CharSet's making
        # (most of a literal character's parse) and its bytes.
        self.singles: dict[int, CharSet] = {}

    def fail(self, construct: str, offset: int | None = None, reason: str = "") -> RegexError:
        return RegexError(construct, self.pos if offset is None else offset, self.text, reason)

    def peek(self, ahead: int = 0) -> str | None:
        i = self.pos + ahead
        return self.text[i] if i < len(self.text) else None

    def parse(self) -> Regex:
        tree = self.alternation()
        if self.pos < len(self.text):  # only an unmatched ")" stops alternation early
            raise self.fail("unbalanced ')'")
        return tree

    def alternation(self) -> Regex:
        branches = [self.concat()]
        while self.peek() == "|":
            self.pos += 1
            if self.work is not None:  # an alternative is more than its "|" (regex_work.py)
                self.work.add(UNITS_PER_BAR)
            branches.append(self.concat())
        return branches[0] if len(branches) == 1 else Alt(tuple(branches))

    def concat(self) -> Regex:
        items: list[Regex] = []
        while (c := self.peek()) is not None and c not in "|)":
            items.append(self.quantified())
        return items[0] if len(items) == 1 else Concat(tuple(items))

    def quantified(self) -> Regex:
        atom = self.atom()
        at = self.pos
        bounds = self.quantifier()
        if bounds is None:
            return atom
        if isinstance(atom, Anchor):
            raise self.fail("a quantifier with nothing to repeat", at)
        if self.peek() == "+":
            raise self.fail("possessive quantifier", self.pos)
        if self.peek() == "?":  # lazy: the same strings, only the preference differs
            self.pos += 1
        again = self.pos
        if self.quantifier() is not None:
            raise self.fail("a quantifier after a quantifier", again)
        return Repeat(atom, bounds[0], bounds[1], at)

    def quantifier(self) -> tuple[int, int | None] | None:
        c = self.peek()
        if c in ("*", "+", "?"):
            self.pos += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        if c != "{":
            return None
        # "{" starts a quantifier only in the forms {n} {n,} {n,m} {,m}; else it is literal
        # (as in Python's re and ECMA-262 without the u flag). Read no further than the form
        # can go: looking for the next "}" from every "{" was quadratic in "a{a{a{...}".
        end = self.pos + 1
        while end < len(self.text) and self.text[end] in _QUANTIFIER_CHARS:
            end += 1
        if end == len(self.text) or self.text[end] != "}":
            return None
        body = self.text[self.pos + 1 : end]
        low, comma, high = body.partition(",")
        valid = (low.isdigit() or (comma and not low)) and (not high or high.isdigit())
        if not valid or not (low or high):
            return None
        at = self.pos
        minimum = _count(low) if low else 0
        maximum = _count(high) if high else (None if comma else minimum)
        shown = body if len(body) <= 24 else body[:20] + "..."
        if max(minimum, maximum or 0) > MAX_REPEAT:
            raise self.fail(f"quantifier {{{shown}}}", at, f"counts above {MAX_REPEAT}")
        if maximum is not None and maximum < minimum:
            raise self.fail(f"quantifier {{{shown}}}", at, "the maximum is below the minimum")
        self.pos = end + 1
        return minimum, maximum

    def atom(self) -> Regex:
        c = self.peek()
        at = self.pos
        if c in ("*", "+", "?"):
            raise self.fail("a quantifier with nothing to repeat")
        self.pos += 1
        if c == "(":
            return self.group(at)
        if c == "[":
            return Chars(self.char_class(at))
        if c == ".":
            return Chars(NOT_NEWLINE)
        if c == "^":
            return Anchor("start", at)
        if c == "$":
            return Anchor("end", at)
        if c == "\\":
            return self.escape(at)
        assert c is not None
        return Chars(self.single(self.code_point(c, at)))

    def single(self, code_point: int) -> CharSet:
        found = self.singles.get(code_point)
        if found is None:
            found = self.singles[code_point] = CharSet.of(code_point)
        return found

    def code_point(self, c: str, at: int) -> int:
        value = ord(c)
        if 0xD800 <= value <= 0xDFFF:
            raise self.fail("a surrogate code point", at)
        return value

    def group(self, at: int) -> Regex:
        if self.depth >= MAX_GROUP_DEPTH:
            raise self.fail(f"groups nested more than {MAX_GROUP_DEPTH} deep", at)
        if self.peek() == "?":
            self.modifier(at)
        self.depth += 1
        inner = self.alternation()
        self.depth -= 1
        if self.peek() != ")":
            raise self.fail("unclosed '('", at)
        self.pos += 1
        return inner

    def modifier(self, at: int) -> None:
        rest = self.text[self.pos + 1 : self.pos + 3]
        if rest.startswith(":"):
            self.pos += 2
            return
        for prefix, what in (
            ("=", "lookahead (?="),
            ("!", "negative lookahead (?!"),
            ("<=", "lookbehind (?<="),
            ("<!", "negative lookbehind (?<!"),
            ("P=", "backreference (?P="),
            (">", "atomic group (?>"),
            ("#", "comment group (?#"),
        ):
            if rest.startswith(prefix):
                raise self.fail(what, at)
        name_start = self.pos + (3 if rest.startswith("P<") else 2 if rest.startswith("<") else 0)
        if name_start == self.pos:
            raise self.fail("inline flags or group modifier '(?'", at)
        end = self.text.find(">", name_start)
        if end < 0 or not self.text[name_start:end].isidentifier():
            raise self.fail("named group", at, "expected (?P<name>...) or (?<name>...)")
        self.pos = end + 1

    def escape(self, at: int) -> Regex:
        c = self.peek()
        if c is None:
            raise self.fail("a trailing backslash", at)
        if c in "AZ":
            self.pos += 1
            return Anchor("start" if c == "A" else "end", at)
        if c in _CLASS_ESCAPES:
            self.pos += 1
            return Chars(_CLASS_ESCAPES[c])
        return Chars(self.single(self.escaped_char(at, in_class=False)))

    def escaped_char(self, at: int, *, in_class: bool) -> int:
        """One code point after a backslash (the backslash at ``at``, ``pos`` after it)."""
        c = self.peek()
        assert c is not None
        self.pos += 1
        if c in _CHAR_ESCAPES:
            return _CHAR_ESCAPES[c]
        if c == "b" and in_class:
            return 0x08
        if c == "0" and not (self.peek() or "").isdigit():
            return 0
        if c.isdigit():
            what = "octal escape" if c == "0" else f"backreference \\{c}"
            raise self.fail(what, at)
        if c == "x":
            return self.hex_digits(at, 2, "\\x")
        if c == "u":
            if self.peek() == "{":
                end = self.text.find("}", self.pos)
                digits = self.text[self.pos + 1 : end] if end > 0 else ""
                if not digits or len(digits) > 6 or not _is_hex(digits):
                    raise self.fail("escape \\u{...}", at, "expected 1 to 6 hex digits")
                self.pos = end + 1
                return self.checked(int(digits, 16), at, "\\u{...}")
            return self.hex_digits(at, 4, "\\u")
        if c == "U":
            return self.hex_digits(at, 8, "\\U")
        if c in _UNSUPPORTED_ESCAPES:
            raise self.fail(_UNSUPPORTED_ESCAPES[c], at)
        if c.isalnum() and c.isascii():
            raise self.fail(f"unknown escape \\{c}", at)
        return self.code_point(c, at + 1)

    def hex_digits(self, at: int, count: int, name: str) -> int:
        digits = self.text[self.pos : self.pos + count]
        if len(digits) != count or not _is_hex(digits):
            raise self.fail(f"escape {name}", at, f"expected {count} hex digits")
        self.pos += count
        return self.checked(int(digits, 16), at, name)

    def checked(self, value: int, at: int, name: str) -> int:
        if value > MAX_CODE_POINT:
            raise self.fail(f"escape {name}", at, "past U+10FFFF")
        if 0xD800 <= value <= 0xDFFF:
            raise self.fail("a surrogate code point", at)
        return value

    def char_class(self, at: int) -> CharSet:
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.fail("unclosed '['", at)
            if c == "]" and not first:  # "]" first is literal (Python's re)
                self.pos += 1
                break
            first = False
            item_at = self.pos
            low = self.class_item()
            if isinstance(low, CharSet):
                ranges.extend(low.ranges)
                if self.peek() == "-" and self.peek(1) not in ("]", None):
                    raise self.fail("a class escape as a range end", item_at)
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", None):
                self.pos += 1
                high = self.class_item()
                if isinstance(high, CharSet):
                    raise self.fail("a class escape as a range end", item_at)
                if high < low:
                    raise self.fail("character range", item_at, "the end is below the start")
                ranges.append((low, high))
            else:
                ranges.append((low, low))
        chars = CharSet(ranges)
        if negate:
            chars = chars.complement()
        if self.work is not None:
            self.work.add(len(chars.ranges) * UNITS_PER_RANGE)
        return chars

    def class_item(self) -> int | CharSet:
        at = self.pos
        c = self.peek()
        assert c is not None
        self.pos += 1
        if c != "\\":
            return self.code_point(c, at)
        e = self.peek()
        if e is None:
            raise self.fail("a trailing backslash", at)
        if e in _CLASS_ESCAPES:
            self.pos += 1
            return _CLASS_ESCAPES[e]
        if e in "AZB":
            raise self.fail(f"\\{e} inside a class", at)
        return self.escaped_char(at, in_class=True)


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


_QUANTIFIER_CHARS = frozenset("0123456789,")


def _count(digits: str) -> int:
    """A quantifier's count; any count past ``MAX_REPEAT`` as ``MAX_REPEAT + 1``, read without
    ``int`` on all its digits (past 4,300 of them Python refuses: a 500, review43)."""
    significant = digits.lstrip("0")
    if len(significant) > len(str(MAX_REPEAT)):
        return MAX_REPEAT + 1
    return int(significant or "0")


def parse_regex(pattern: str, work: WorkCounter | None = None) -> Regex:
    """The tree for ``pattern``; raises ``RegexError`` naming an unsupported construct.
    ``work``: charged the ranges of each class made (``AutomatonWorkExceeded`` past its budget);
    the pattern's characters are charged by its caller, before it is read."""
    return _Parser(pattern, work).parse()
