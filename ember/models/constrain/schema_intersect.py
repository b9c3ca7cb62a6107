"""The intersection of two schemas, as one schema the grammar compiler takes (lenient mode's
combinator siblings merged into each alternative, schema_merge.py).

JSON Schema means "both hold" where a combinator has siblings. ``intersect`` writes that as one
schema for the keywords ember enforces: ``type`` sets meet (``integer`` within ``number``;
``nullable`` read as ``null``), the tighter of each numeric, length and count bound,
``enum``/``const`` values both allow, ``items`` and each property's schema intersected in turn
(a name one side does not declare takes that side's ``additionalProperties``, so ``false`` there
forbids it), ``required`` united. A type whose met keywords leave it no value (bounds that
cross, ``minLength`` above ``maxLength``, two different known formats) leaves the type list,
other types keeping their values; ``EMPTY`` when no value can satisfy both.

Two keywords do not meet exactly: of two different ``pattern``s only the second (the
alternative's) is enforced, and of a known ``format`` and another one the known one (JSON Schema
2020-12 makes ``format`` an annotation, so that is a subset). ``None``: a part cannot be merged
at all (a ``$ref``, or a value that is not a schema); the caller ignores the combinator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.formats import FORMAT_PATTERNS
from ember.models.constrain.json_values import type_allows, value_key
from ember.models.constrain.number_schema import parse_range

# A sentinel: the intersection holds no value.
EMPTY = False
# What the ``format`` rule gives for two different formats ember enforces: no string has both.
_NO_STRING = object()
COMBINATORS = ("anyOf", "oneOf", "allOf")
_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems")
_OBJECT = ("properties", "additionalProperties", "required")

Schema = Mapping | bool
Result = Mapping | bool | None


def intersect(a: object, b: object) -> Result:
    """One schema allowing what both ``a`` and ``b`` allow (see the module's text)."""
    if a is b or b is True or (isinstance(b, Mapping) and not b):
        return a if isinstance(a, Mapping | bool) else None
    if a is True or (isinstance(a, Mapping) and not a):
        return b if isinstance(b, Mapping | bool) else None
    if a is False or b is False:
        return EMPTY
    if not isinstance(a, Mapping) or not isinstance(b, Mapping) or "$ref" in a or "$ref" in b:
        return None
    a, b = _normalised(a), _normalised(b)
    out = dict(a)
    lacking: set[str] = set()  # types the met keywords leave no value
    for key, value in b.items():
        if key in _OBJECT:
            continue  # below, together
        if key not in out or out[key] == value:
            out[key] = value
            continue
        rule = _RULES.get(key)
        if rule is not None:
            met = rule(out[key], value)
        elif key in COMBINATORS:
            met = _nest(out, key, value)
        else:
            met = value  # an annotation or a keyword ember ignores: either will do
        if met is None:
            return None
        if met is _NO_STRING:
            lacking.add("string")
            met = value
        if met is EMPTY:
            if key != "items":
                return EMPTY
            met, out["maxItems"] = True, 0  # no item fits both: only [] does
        out[key] = met
    if not _drop_types(out, lacking | _lacking(out)):
        return EMPTY
    if "enum" in out or "const" in out:
        literals = _literals(a, b)
        if not literals:
            return EMPTY
        out.pop("const", None)
        out["enum"] = literals
    if any(k in a or k in b for k in _OBJECT):
        return _object(a, b, out)
    return out


def _normalised(schema: Mapping) -> Mapping:
    """``nullable`` folded into ``type``, draft 4's boolean ``exclusive*`` into numbers."""
    if "nullable" not in schema and not any(
        isinstance(schema.get(k), bool) for k in ("exclusiveMinimum", "exclusiveMaximum")
    ):
        return schema
    out = dict(schema)
    if out.pop("nullable", None) is True:
        # The compiler reads nullable as "or null", beside enum/const too (schema.py).
        if "type" in out:
            kinds = [out["type"]] if isinstance(out["type"], str) else list(out["type"])
            out["type"] = [*kinds, "null"]
        values = _values(out)
        if values is not None:
            out.pop("const", None)
            out["enum"] = [*values, None]
    for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(flag), bool):
            if out.pop(flag) and _number(out.get(bound)):
                out[flag] = out.pop(bound)
    return out


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _types(a: object, b: object) -> object:
    def kinds(t: object) -> list | None:
        if isinstance(t, str):
            return [t]
        return t if isinstance(t, list) and all(isinstance(k, str) for k in t) else None

    ka, kb = kinds(a), kinds(b)
    if ka is None or kb is None:
        return b  # not a type: the compiler names it
    met = [t for t in ka if type_allows(set(kb), _SAMPLE.get(t))]
    met += [t for t in kb if t == "integer" and "number" in ka and t not in met]
    return met or EMPTY


# A value of each type, to ask type_allows whether a type lies within a list of them.
_SAMPLE = {
    "object": {},
    "array": [],
    "string": "",
    "number": 0.5,
    "integer": 1,
    "boolean": True,
    "null": None,
}


def _tighter(pick: Callable[[object, object], object]) -> Callable[[object, object], object]:
    def rule(a: object, b: object) -> object:
        if _number(a) and _number(b):
            return pick(a, b)
        return a if _number(a) else b  # a broken bound is ignored: keep the sound one

    return rule


def _format(a: object, b: object) -> object:
    known_a, known_b = a in FORMAT_PATTERNS, b in FORMAT_PATTERNS
    if known_a and known_b:
        return _NO_STRING  # ember's formats are disjoint: no date is a uuid, no email an ipv4
    return a if known_a else b


def _lacking(schema: Mapping) -> set[str]:
    """The types ``schema``'s bounds, lengths or counts leave with no value (a malformed
    keyword is the compiler's to name or, lenient, to ignore)."""
    lacking = set()
    try:
        bounds = parse_range(schema, "")
    except InvalidRequestField:
        bounds = None
    if bounds is not None and bounds.holds_none(integer=False):
        lacking |= {"number", "integer"}
    elif bounds is not None and bounds.holds_none(integer=True):
        lacking.add("integer")
    for low, high, kind in (
        ("minLength", "maxLength", "string"),
        ("minItems", "maxItems", "array"),
    ):
        if _count(schema.get(low)) and _count(schema.get(high)) and schema[low] > schema[high]:
            lacking.add(kind)
    return lacking


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _drop_types(out: dict, lacking: set[str]) -> bool:
    """Take the ``lacking`` types out of ``out``'s type (all types where it has none); False
    when none is left."""
    if not lacking:
        return True
    declared = out.get("type", list(_SAMPLE))
    kinds = [declared] if isinstance(declared, str) else declared
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        return True  # not a type: the compiler names it
    kept = [k for k in kinds if k not in lacking]
    out["type"] = kept
    return bool(kept)


def _nest(out: dict, key: str, value: object) -> object:
    """Both sides carry combinator ``key``: the second goes inside an ``allOf`` of one, which
    the compiler merges with the rest in turn; two ``allOf``s of one meet inside one."""
    if key == "allOf":
        mine = out[key]
        if isinstance(mine, list) and isinstance(value, list) and mine and value:
            met = intersect(mine[0], value[0])
            return met if met is None or met is EMPTY else [met]
        return None
    if "allOf" in out:
        return None
    out["allOf"] = [{key: value}]
    return out[key]


def _literals(a: Mapping, b: Mapping) -> list:
    """The ``enum``/``const`` values both sides allow (JSON equality: ``1`` is ``1.0``)."""
    va, vb = _values(a), _values(b)
    if va is None:
        return vb or []
    if vb is None:
        return va
    keys = {value_key(v) for v in vb}
    return [v for v in va if value_key(v) in keys]


def _values(schema: Mapping) -> list | None:
    """The values ``enum`` and ``const`` both allow (None: neither is there)."""
    values = schema.get("enum")
    values = list(values) if isinstance(values, list) else None
    if "const" not in schema:
        return values
    if values is None:
        return [schema["const"]]
    return [v for v in values if value_key(v) == value_key(schema["const"])]


def _object(a: Mapping, b: Mapping, out: dict) -> Result:
    """``properties``, ``additionalProperties`` and ``required`` of both."""
    pa, pb = a.get("properties", {}), b.get("properties", {})
    xa, xb = a.get("additionalProperties", True), b.get("additionalProperties", True)
    if not isinstance(pa, Mapping) or not isinstance(pb, Mapping):
        return None
    properties: dict = {}
    for name in [*pa, *(n for n in pb if n not in pa)]:
        met = intersect(pa.get(name, xa), pb.get(name, xb))
        if met is None:
            return None
        properties[name] = met
    if properties:
        out["properties"] = properties
    if "additionalProperties" in a or "additionalProperties" in b:
        extra = intersect(xa, xb)
        if extra is None:
            return None
        out["additionalProperties"] = extra
    ra, rb = a.get("required", []), b.get("required", [])
    if not isinstance(ra, list) or not isinstance(rb, list):
        return None
    required = list(dict.fromkeys([*ra, *rb]))
    if required:
        out["required"] = required
    extra = out.get("additionalProperties", True)
    for name in required:
        if properties.get(name, extra) is EMPTY:
            return EMPTY  # a required property no value may have
    return out


_RULES: dict[str, Callable[[object, object], object]] = {
    "type": _types,
    "format": _format,
    **{k: _tighter(max) for k in _LOWER},
    **{k: _tighter(min) for k in _UPPER},
    "items": intersect,
    "enum": lambda a, b: b,  # settled below, with const
    "const": lambda a, b: b,
}
