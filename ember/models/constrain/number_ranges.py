"""Numeric bounds as regexes: a JSON number text the regex accepts spells an in-range value.

The rule (JSON Schema's ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``):

- ``integer``: exact. Every integer in the range with at most ``MAX_DIGITS`` digits, in JSON's
  spelling (no leading zeros, no ``-0``), and nothing else: the classic digit-range
  decomposition (split by digit count, then by the first digit where the ends differ).
- ``number``: exact too, without exponents. A value is an integer part and a fraction; with
  the integer part ``I`` between the ends' integer parts any fraction keeps it in range; at an
  end ``I`` the fraction compares with the end's fraction digit by digit (``0.F >= 0.α`` is a
  lexicographic comparison of the digits padded with zeros), which a regex spells in one
  alternative per digit of the bound. The text has at most ``MAX_DIGITS`` digits in all
  (integer part and fraction): two different decimals of at most 15 significant digits are
  different doubles, so the comparison the client makes after ``json.loads`` (a float against
  the bound's float) agrees with the decimal one here, ``exclusive*`` included.

Bounds are taken as the shortest decimal that reads back as the same float (``repr``), which is
what the schema's author wrote. A range holding no value of at most 15 digits gives ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

MAX_DIGITS = 15
LIMIT = 10**MAX_DIGITS - 1


@dataclass(frozen=True)
class Bound:
    value: Decimal
    exclusive: bool


@dataclass(frozen=True)
class NumericRange:
    """``low``/``high`` None: open on that side."""

    low: Bound | None
    high: Bound | None

    def contains(self, value: Decimal) -> bool:
        """The slow reference: the predicate the regexes must agree with."""
        if self.low is not None:
            if value < self.low.value or (self.low.exclusive and value == self.low.value):
                return False
        if self.high is not None:
            if value > self.high.value or (self.high.exclusive and value == self.high.value):
                return False
        return True

    def holds_none(self, *, integer: bool) -> bool:
        """Whether no number (``integer``: no integer) lies in range, however many digits:
        an empty range, unlike one whose values are merely too long for ember to spell."""
        low, high = self.low, self.high
        if low is None or high is None:
            return False
        if integer:
            first = int(low.value.to_integral_value(rounding="ROUND_CEILING"))
            last = int(high.value.to_integral_value(rounding="ROUND_FLOOR"))
            first += low.exclusive and first == low.value
            last -= high.exclusive and last == high.value
            return first > last
        if low.value == high.value:
            return low.exclusive or high.exclusive
        return low.value > high.value

    def integer_ends(self) -> tuple[int, int]:
        """The least and greatest integer in range, clamped to ``MAX_DIGITS`` digits (may cross:
        no integer in range)."""
        low, high = -LIMIT, LIMIT
        if self.low is not None:
            v = self.low.value
            first = int(v.to_integral_value(rounding="ROUND_FLOOR")) + 1
            low = max(low, first if self.low.exclusive or v != int(v) else int(v))
        if self.high is not None:
            v = self.high.value
            last = int(v.to_integral_value(rounding="ROUND_CEILING")) - 1
            high = min(high, last if self.high.exclusive or v != int(v) else int(v))
        return low, high


def _alt(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _cls(low: int, high: int) -> str:
    return str(low) if low == high else f"[{low}-{high}]"


def _digits(n: int) -> str:
    return "" if n == 0 else r"\d" if n == 1 else rf"\d{{{n}}}"


def _upto(n: int) -> str:
    """Zero to ``n`` more digits."""
    return "" if n == 0 else rf"\d{{0,{n}}}"


def _same_length(x: str, y: str) -> str:
    """Digit strings of ``len(x)`` from ``x`` to ``y`` (``x <= y``, equal lengths)."""
    if x == y:
        return x
    if x[0] == y[0]:
        return x[0] + _same_length(x[1:], y[1:])
    rest = len(x) - 1
    low_full, high_full = x[1:] == "0" * rest, y[1:] == "9" * rest
    parts = []
    if not low_full:
        parts.append(x[0] + _alt([_same_length(x[1:], "9" * rest)]))
    first, last = int(x[0]) + (not low_full), int(y[0]) - (not high_full)
    if first <= last:
        parts.append(_cls(first, last) + _digits(rest))
    if not high_full:
        parts.append(y[0] + _alt([_same_length("0" * rest, y[1:])]))
    return _alt(parts)


def _natural_pieces(low: int, high: int) -> list[tuple[int, str]]:
    """``(digit count, regex)`` pieces spelling the naturals ``low..high`` (``0 <= low``)."""
    pieces = []
    for k in range(len(str(low)), len(str(high)) + 1):
        a, b = max(low, 10 ** (k - 1) if k > 1 else 0), min(high, 10**k - 1)
        if a <= b:
            pieces.append((k, _same_length(str(a), str(b))))
    return pieces


def integer_regex(low: int, high: int) -> str | None:
    """The JSON integers ``low..high`` (None: none)."""
    parts = []
    if low < 0 and max(1, -high) <= -low:
        parts.append("-" + _alt([r for _, r in _natural_pieces(max(1, -high), -low)]))
    if high >= 0 and max(low, 0) <= high:
        parts += [r for _, r in _natural_pieces(max(low, 0), high)]
    return "|".join(parts) if parts else None


# Fractions: the digits F after the point, compared as 0.F (zero-padded); a language of them is
# ``(empty allowed, regexes of non-empty F)``, every F at most ``room`` digits.
Fractions = tuple[bool, list[str]]


def _prefixed(digit: str, tail: Fractions) -> list[str]:
    empty, parts = tail
    if parts:
        return [digit + "(?:" + "|".join(parts) + (")?" if empty else ")")]
    return [digit] if empty else []


def _any(room: int) -> Fractions:
    return True, ([rf"\d{{1,{room}}}"] if room > 0 else [])


def _at_least(alpha: str, room: int, strict: bool) -> Fractions:
    """0.F >= 0.alpha (> when strict)."""
    if not alpha.strip("0"):
        if not strict:
            return _any(room)
        # Non-zero: one alternative per count of leading zeros.
        return False, ["0" * z + "[1-9]" + _upto(room - 1 - z) for z in range(room)]
    if room == 0:
        return False, []
    d = int(alpha[0])
    parts = [_cls(d + 1, 9) + _upto(room - 1)] if d < 9 else []
    return False, parts + _prefixed(alpha[0], _at_least(alpha[1:], room - 1, strict))


def _at_most(beta: str, room: int, strict: bool) -> Fractions:
    """0.F <= 0.beta (< when strict)."""
    if not beta.strip("0"):
        if strict:
            return False, []
        return True, ([f"0{{1,{room}}}"] if room > 0 else [])
    if room == 0:
        return True, []
    d = int(beta[0])
    parts = [_cls(0, d - 1) + _upto(room - 1)] if d > 0 else []
    return True, parts + _prefixed(beta[0], _at_most(beta[1:], room - 1, strict))


def _between(alpha: str, beta: str, room: int, low_strict: bool, high_strict: bool) -> Fractions:
    """0.alpha <= 0.F <= 0.beta (``alpha <= beta`` zero-padded)."""
    alpha_zero, beta_zero = not alpha.strip("0"), not beta.strip("0")
    if alpha_zero and beta_zero:
        if low_strict or high_strict:
            return False, []
        return True, ([f"0{{1,{room}}}"] if room > 0 else [])
    empty = alpha_zero and not low_strict  # beta is not zero here, so F = 0 is below it
    if room == 0:
        return empty, []
    a, b = alpha[:1] or "0", beta[:1] or "0"
    if a == b:
        return empty, _prefixed(a, _between(alpha[1:], beta[1:], room - 1, low_strict, high_strict))
    parts = _prefixed(a, _at_least(alpha[1:], room - 1, low_strict))
    if int(a) + 1 <= int(b) - 1:
        parts.append(_cls(int(a) + 1, int(b) - 1) + _upto(room - 1))
    return empty, parts + _prefixed(b, _at_most(beta[1:], room - 1, high_strict))


def _split(value: Decimal) -> tuple[int, str]:
    """A non-negative decimal's integer part and fraction digits (no trailing zeros)."""
    whole, _, fraction = format(value, "f").partition(".")
    return int(whole), fraction.rstrip("0")


def _with_fraction(integer: str, fractions: Fractions) -> list[str]:
    empty, parts = fractions
    if not parts:
        return [integer] if empty else []
    tail = r"\." + _alt(parts)
    return [_alt([integer]) + (f"(?:{tail})?" if empty else tail)]


def _non_negative(low: Bound, high: Bound) -> list[str]:
    """Numbers ``low..high`` with ``0 <= low``."""
    (a, alpha), (b, beta) = _split(low.value), _split(high.value)
    room_a, room_b = MAX_DIGITS - len(str(a)), MAX_DIGITS - len(str(b))
    if a == b:
        return _with_fraction(str(a), _between(alpha, beta, room_a, low.exclusive, high.exclusive))
    parts = _with_fraction(str(a), _at_least(alpha, room_a, low.exclusive))
    if a + 1 <= b - 1:
        for k, regex in _natural_pieces(a + 1, b - 1):
            parts += _with_fraction(regex, _any(MAX_DIGITS - k))
    return parts + _with_fraction(str(b), _at_most(beta, room_b, high.exclusive))


def number_regex(bounds: NumericRange) -> str | None:
    """JSON numbers (no exponent, at most ``MAX_DIGITS`` digits) in ``bounds`` (None: none)."""
    low, high = bounds.low, bounds.high
    if low is None or low.value < -LIMIT:
        low = Bound(Decimal(-LIMIT), False)
    if high is None or high.value > LIMIT:
        high = Bound(Decimal(LIMIT), False)
    if low.value > high.value or (low.value == high.value and (low.exclusive or high.exclusive)):
        return None
    zero = Decimal(0)
    parts = []
    if low.value < zero:  # -y for y in (0 or -high .. -low]: never "-0"
        y_low = Bound(-high.value, high.exclusive) if high.value < zero else Bound(zero, True)
        negative = _non_negative(y_low, Bound(-low.value, low.exclusive))
        if negative:
            parts.append("-" + _alt(negative))
    if high.value >= zero:
        start = low if low.value >= zero else Bound(zero, False)
        if start.value < high.value or (
            start.value == high.value and not (start.exclusive or high.exclusive)
        ):
            parts += _non_negative(start, high)
    return "|".join(parts) if parts else None
