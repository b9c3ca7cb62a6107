"""The node for a ``type: integer`` / ``type: number`` schema: plain ``JNumber``, or with
``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum`` a regex (number_ranges.py)
that can only spell in-range values, so the bounds hold by construction.

``exclusiveMinimum``/``exclusiveMaximum`` are numbers (draft 6 and later, Pydantic, OpenAI) or,
in draft 4's and OpenAPI 3.0's form, ``true``/``false`` beside ``minimum``/``maximum``. Several
lower (upper) bounds: the tightest wins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automata import Automata
from ember.models.constrain.json_nodes import JNumber
from ember.models.constrain.nodes import Node
from ember.models.constrain.number_ranges import (
    MAX_DIGITS,
    Bound,
    NumericRange,
    integer_regex,
    number_regex,
)
from ember.models.constrain.regex_nodes import RegexText

BOUND_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _decimal(value: object, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequestField(where, "a number", str(value)[:80])
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRequestField(where, "a finite number", str(value))
    # repr: the shortest decimal that reads back as this float, i.e. what the author wrote.
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _tighter(old: Bound | None, new: Bound, lower: bool) -> Bound:
    if old is None:
        return new
    if new.value == old.value:
        return Bound(new.value, new.exclusive or old.exclusive)
    return new if (new.value > old.value) == lower else old


def _first_key(schema: Mapping, *keys: str) -> str:
    return next(k for k in keys if isinstance(schema.get(k), int | float) and schema[k] is not True)


def numeric_range(schema: Mapping, path: str) -> NumericRange | None:
    """The bounds ``schema`` sets (None: none); ``InvalidRequestField`` names a bad keyword or an
    empty range."""
    bounds = parse_range(schema, path)
    if bounds is None:
        return None
    low, high = bounds.low, bounds.high
    if low is not None and high is not None and not bounds.contains(low.value):
        if low.value >= high.value:
            where = _first_key(schema, "exclusiveMaximum", "maximum")
            raise InvalidRequestField(
                f"{path}/{where}",
                f"a range some value satisfies (above the lower bound {low.value})",
                str(schema[where]),
            )
    return bounds


def parse_range(schema: Mapping, path: str) -> NumericRange | None:
    """The bounds ``schema`` sets (None: none), empty or not; ``InvalidRequestField`` names a
    malformed keyword (not a number, ``exclusiveMinimum: true`` alone)."""
    if not any(k in schema for k in BOUND_KEYWORDS):
        return None
    low: Bound | None = None
    high: Bound | None = None
    for key, lower in (("minimum", True), ("maximum", False)):
        flag_key = "exclusiveMinimum" if lower else "exclusiveMaximum"
        flag = schema.get(flag_key)
        exclusive = flag is True  # draft 4: a boolean beside minimum/maximum
        if key in schema:
            bound = Bound(_decimal(schema[key], f"{path}/{key}"), exclusive)
            low, high = (bound, high) if lower else (low, bound)
        elif isinstance(flag, bool) and flag:
            raise InvalidRequestField(
                f"{path}/{flag_key}", f"a number, or true beside '{key}'", "true alone"
            )
        if flag is not None and not isinstance(flag, bool):
            bound = Bound(_decimal(flag, f"{path}/{flag_key}"), True)
            if lower:
                low = _tighter(low, bound, lower=True)
            else:
                high = _tighter(high, bound, lower=False)
    return NumericRange(low, high)


def number_node(
    schema: Mapping, path: str, *, integer: bool, strict: bool, automata: Automata | None = None
) -> Node:
    """``JNumber``, or the bounded regex. Strict: a bad bound or a range that holds no value
    ember generates (at most 15 digits) is an ``InvalidRequestField``; lenient (tool
    parameters): a malformed bound, or a range whose values all have more digits, is ignored,
    but a range that holds no number (integer) at all is an error there too: ignoring it would
    let any number through where JSON Schema allows none (a lenient ``anyOf`` leaves such an
    alternative out). ``automata``: the schema's, which builds each range once and bounds their
    cost (None: build it here)."""
    try:
        parsed = parse_range(schema, path)
    except InvalidRequestField:
        if strict:
            raise
        return JNumber(integer=integer)  # a malformed bound is ignored
    try:
        bounds = numeric_range(schema, path)
        if bounds is None:
            return JNumber(integer=integer)
        regex = integer_regex(*bounds.integer_ends()) if integer else number_regex(bounds)
        if regex is None:
            kind = "an integer" if integer else f"a number of at most {MAX_DIGITS} digits"
            where = _first_key(schema, *BOUND_KEYWORDS)
            raise InvalidRequestField(
                f"{path}/{where}",
                f"a range that holds {kind} (what ember generates)",
                str(schema[where]),
                "unsupported_value",
            )
    except InvalidRequestField:
        if strict or (parsed is not None and parsed.holds_none(integer=integer)):
            raise
        return JNumber(integer=integer)
    # Without the schema's budget, a budget of its own: never built unbounded (review43).
    automata = Automata() if automata is None else automata
    where = _first_key(schema, *BOUND_KEYWORDS)
    return RegexText(automata.regex(regex, f"{path}/{where}"))


def literals_in_range(values: list, schema: Mapping, path: str, *, strict: bool) -> list:
    """The ``enum``/``const`` values the bounds allow (bounds constrain numbers only: other
    values pass). Lenient, a malformed bound is ignored; a range holding no number keeps no
    number."""
    try:
        bounds = numeric_range(schema, path) if strict else parse_range(schema, path)
    except InvalidRequestField:
        if strict:
            raise
        return values
    if bounds is None:
        return values
    return [
        v
        for v in values
        if isinstance(v, bool)
        or not isinstance(v, int | float)
        or (math.isfinite(v) and bounds.contains(_decimal(v, path)))
    ]
