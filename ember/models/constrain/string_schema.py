"""The nodes for a ``type: string`` schema: length bounds, ``pattern`` and ``format``, for JSON
strings and for raw text (GLM's tool-call argument values).

``pattern`` follows JSON Schema: a regex *searched* for in the decoded string (anchor it with
``^...$`` to constrain the whole value), compiled by ``regex_nfa`` and matched through the
JSON spelling by ``JRegexString``, or through the raw text by ``RegexText``. A ``format``
listed in ``formats.FORMAT_PATTERNS`` is enforced the same way when no ``pattern`` is given
(JSON Schema leaves ``format`` an annotation by default, so enforcing a subset is still valid;
with a pattern, the pattern wins). Other formats stay annotations. ``minLength``/``maxLength``
count characters (code points) on both paths.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automata import Automata, AutomatonBudgetExceeded
from ember.models.constrain.formats import FORMAT_PATTERNS
from ember.models.constrain.json_nodes import JString
from ember.models.constrain.nodes import (
    BoundedText,
    FreeText,
    Marker,
    Node,
    Seq,
    SubstringGuard,
)
from ember.models.constrain.regex_avoid import RawRegexText, SpellsForbidden
from ember.models.constrain.regex_nfa import RegexAutomaton
from ember.models.constrain.regex_nodes import JRegexString
from ember.models.constrain.regex_syntax import RegexError

REGEX_SUBSET = (
    "a regular expression in ember's subset (literals, escapes, '.', classes, \\d \\w \\s, "
    "quantifiers, groups, alternation, '^' and '$' at the ends)"
)


def count_keyword(schema: Mapping, key: str, path: str) -> int | None:
    """A ``minLength``-like keyword's value; a bad one is an error naming it."""
    value = schema.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        shown = value if isinstance(value, str) else json.dumps(value)[:80]
        raise InvalidRequestField(f"{path}/{key}", "a non-negative integer", shown)
    return value


def length_bounds(schema: Mapping, path: str) -> tuple[int, int | None]:
    """``(minLength, maxLength)``, 0 and None when absent."""
    low = count_keyword(schema, "minLength", path) or 0
    high = count_keyword(schema, "maxLength", path)
    if high is not None and high < low:
        raise InvalidRequestField(path + "/maxLength", f"at least minLength ({low})", str(high))
    return low, high


def literals_fitting(
    values: list, schema: Mapping, path: str, automata: Automata | None = None
) -> list:
    """The ``enum``/``const`` values the string and array keywords beside them allow (each
    constrains its own type only; a keyword ember cannot read is ignored here)."""
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        try:
            low, high = length_bounds(schema, path)
            regex = string_regex(schema, path, low=low, high=high, strict=False, automata=automata)
        except AutomatonBudgetExceeded:
            raise
        except InvalidRequestField:
            low, high, regex = 0, None, None
        values = [v for v in values if not isinstance(v, str) or _fits(v, low, high, regex)]
    if any(k in schema for k in ("minItems", "maxItems")):
        try:
            low = count_keyword(schema, "minItems", path) or 0
            high = count_keyword(schema, "maxItems", path)
        except InvalidRequestField:
            return values
        values = [v for v in values if not isinstance(v, list) or _fits(v, low, high, None)]
    return values


def _fits(value: str | list, low: int, high: int | None, regex: RegexAutomaton | None) -> bool:
    if len(value) < low or (high is not None and len(value) > high):
        return False
    if regex is None:
        return True
    states = regex.start
    for char in value:
        states = regex.step(states, ord(char))
        if not states:
            return False
    return regex.accepts(states)


def _pattern_source(schema: Mapping, path: str) -> tuple[object, str] | None:
    """The pattern that applies (the schema's own, else a known format's) and its path."""
    pattern = schema.get("pattern")
    if pattern is not None:
        return pattern, f"{path}/pattern"
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in FORMAT_PATTERNS:
        return FORMAT_PATTERNS[fmt], f"{path}/format"
    return None


def string_regex(
    schema: Mapping,
    path: str,
    *,
    low: int,
    high: int | None,
    strict: bool,
    automata: Automata | None = None,
) -> RegexAutomaton | None:
    """The automaton for the schema's pattern (or known format) with the length bounds in it,
    or None when neither applies. Strict: a pattern ember cannot compile is an
    ``InvalidRequestField`` naming the construct and its offset; lenient (tool parameters):
    such a pattern is ignored. ``automata``: the schema's (None: build it here)."""
    source = _pattern_source(schema, path)
    if source is None:
        return None
    pattern, where = source
    if not isinstance(pattern, str):
        if strict:
            raise InvalidRequestField(where, "a regular expression (a string)", str(pattern)[:80])
        return None
    try:
        # Without the schema's budget, a budget of its own: never built unbounded (review43).
        automata = Automata() if automata is None else automata
        return automata.regex(pattern, where, search=True, length=(low, high))
    except RegexError as error:
        if strict:
            raise InvalidRequestField(
                where, REGEX_SUBSET, f"{error} in {pattern[:80]!r}", "unsupported_value"
            ) from None
        return None


def string_node(
    schema: Mapping,
    path: str,
    *,
    low: int,
    high: int | None,
    strict: bool,
    guard: SubstringGuard,
    automata: Automata | None = None,
) -> Node:
    """``JString`` for a plain string, ``JRegexString`` when a pattern or known format applies."""
    regex = string_regex(schema, path, low=low, high=high, strict=strict, automata=automata)
    if regex is None:
        return JString(low, high, guard=guard)
    return JRegexString(regex, guard=guard)


def raw_string_node(
    schema: Mapping,
    path: str,
    *,
    marker: Marker,
    terminator: str,
    forbidden: Sequence[str],
    strict: bool = False,
    automata: Automata | None = None,
) -> Node:
    """A raw text value and its ``terminator`` marker (GLM's ``...</arg_value>``), the text
    never spelling one of ``forbidden`` (the terminator among them). The length bounds, pattern
    and format hold by construction, as in a JSON string: the terminator is refused before
    ``minLength`` characters and is all that may follow ``maxLength`` of them. ``automata``:
    the budget of the whole schema this value is part of (a GLM tool's parameters), so that
    its properties' patterns count together, as on the JSON path; None: this value's own."""
    low, high = length_bounds(schema, path)
    automata = Automata() if automata is None else automata
    regex = string_regex(schema, path, low=low, high=high, strict=strict, automata=automata)
    end = marker(terminator)
    byte_end = marker.token_id(terminator) is None
    if regex is not None:
        try:
            # One node per distinct automaton (its liveness table is as large as it is):
            # properties repeating a pattern share it, as the JSON path shares the automaton.
            key = ("raw", id(regex), tuple(forbidden), byte_end)
            text = automata.derived(key, lambda: RawRegexText(regex, forbidden, byte_end=byte_end))
            return Seq([text, end])
        except SpellsForbidden:
            pattern, where = _pattern_source(schema, path)  # type: ignore[misc]
            raise InvalidRequestField(
                where,
                "a pattern that some value matches without spelling a tool-call marker ("
                + ", ".join(forbidden)
                + ")",
                str(pattern)[:80],
            ) from None
    if low == 0 and high is None:
        others = tuple(m for m in forbidden if m != terminator)
        return FreeText(terminator, marker.token_id(terminator), forbidden=others)
    guard = SubstringGuard([m.encode() for m in forbidden])
    return Seq([BoundedText(low, high, guard, byte_end=byte_end), end])
