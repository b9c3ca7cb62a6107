"""The node for a ``type: string`` schema: length bounds, ``pattern`` and ``format``.

``pattern`` follows JSON Schema: a regex *searched* for in the decoded string (anchor it with
``^...$`` to constrain the whole value), compiled by ``regex_nfa`` and matched through the
JSON spelling by ``JRegexString``. A ``format`` listed in ``formats.FORMAT_PATTERNS`` is
enforced the same way when no ``pattern`` is given (JSON Schema leaves ``format`` an annotation
by default, so enforcing a subset is still valid; with a pattern, the pattern wins). Other
formats stay annotations.
"""

from __future__ import annotations

from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.formats import FORMAT_PATTERNS
from ember.models.constrain.json_nodes import JString
from ember.models.constrain.nodes import Node, SubstringGuard
from ember.models.constrain.regex_nfa import compile_regex
from ember.models.constrain.regex_nodes import JRegexString
from ember.models.constrain.regex_syntax import RegexError

REGEX_SUBSET = (
    "a regular expression in ember's subset (literals, escapes, '.', classes, \\d \\w \\s, "
    "quantifiers, groups, alternation, '^' and '$' at the ends)"
)


def string_node(
    schema: Mapping,
    path: str,
    *,
    low: int,
    high: int | None,
    strict: bool,
    guard: SubstringGuard,
) -> Node:
    """``JString`` for a plain string, ``JRegexString`` when a pattern or known format applies.
    Strict: a pattern ember cannot compile is an ``InvalidRequestField`` naming the construct
    and its offset; lenient (tool parameters): such a pattern is ignored."""
    pattern = schema.get("pattern")
    where = f"{path}/pattern"
    if pattern is None:
        fmt = schema.get("format")
        if not isinstance(fmt, str) or fmt not in FORMAT_PATTERNS:
            return JString(low, high, guard=guard)
        pattern, where = FORMAT_PATTERNS[fmt], f"{path}/format"
    if not isinstance(pattern, str):
        if strict:
            raise InvalidRequestField(where, "a regular expression (a string)", str(pattern)[:80])
        return JString(low, high, guard=guard)
    try:
        regex = compile_regex(pattern, search=True, length=(low, high))
    except RegexError as error:
        if strict:
            raise InvalidRequestField(
                where, REGEX_SUBSET, f"{error} in {pattern[:80]!r}", "unsupported_value"
            ) from None
        return JString(low, high, guard=guard)
    return JRegexString(regex, guard=guard)
