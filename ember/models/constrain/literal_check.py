"""Whether an ``enum``/``const`` array or object satisfies the schema around it.

The grammar spells a listed value verbatim (``JLiteralSet``), so a value the rest of the schema
refuses would be generated as listed: ``{"type": "array", "items": {"const": 3}, "enum": [[1]]}``
must generate nothing. The compiler's own filters read the keywords of the literal's top level
(type, bounds, lengths, pattern, counts); this reads the rest, into the value: ``items``,
``properties``, ``required``, ``additionalProperties``, ``anyOf``/``oneOf``/``allOf``, local
``$ref``s and nested ``enum``/``const``, as JSON Schema does (keys in any order, an absent
``additionalProperties`` allowing other keys: the value is written as listed, so the narrower
default of what the grammar generates does not apply). The compiled node's own matcher would
refuse ``{"b": 1, "a": 2}`` where properties are declared ``a`` then ``b`` (the grammar writes
them in schema order), which is why this walks the value instead. Keywords ember does not
enforce are not read (lenient ignores them; strict refuses them before a value is checked).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ember.models.constrain.automata import Automata
from ember.models.constrain.json_values import type_allows, value_key
from ember.models.constrain.number_schema import literals_in_range
from ember.models.constrain.string_schema import literals_fitting

# A local ``$ref``'s target (None: no such part; the compiler names it).
Resolve = Callable[[str], object]
COMBINATORS = ("anyOf", "oneOf", "allOf")
# Levels of a value this walks into (the compiler's MAX_DEPTH); a deeper one is not taken.
MAX_VALUE_DEPTH = 128


class LiteralCheck:
    """One schema's check of its listed values against the schema that lists them."""

    def __init__(self, resolve: Resolve, automata: Automata) -> None:
        self.resolve = resolve
        self.automata = automata
        # $refs being followed for a value not yet descended into: meeting one again is a
        # cycle through references alone, which no value ends.
        self.following: set[tuple[str, int]] = set()

    def fits(self, value: object, schema: object, depth: int = 0) -> bool:
        """Whether ``value`` satisfies ``schema`` (for the keywords above)."""
        if schema is True or schema is False:
            return schema
        if not isinstance(schema, Mapping):
            return True  # not a schema: the compiler names it
        if depth > MAX_VALUE_DEPTH:
            return False
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._follow(value, ref, depth)
        for combinator in COMBINATORS:
            branches = schema.get(combinator)
            if isinstance(branches, list) and branches:
                rest = {k: v for k, v in schema.items() if k != combinator}
                either = all if combinator == "allOf" else any
                fits = either(self.fits(value, b, depth) for b in branches)
                return fits and self.fits(value, rest, depth)
        if value is None and schema.get("nullable") is True:
            return True
        return self._own(value, schema, depth)

    def _follow(self, value: object, ref: str, depth: int) -> bool:
        key = (ref, id(value))
        if key in self.following:
            return False
        target = self.resolve(ref)
        if target is None:
            return True
        self.following.add(key)
        try:
            return self.fits(value, target, depth)
        finally:
            self.following.discard(key)

    def _own(self, value: object, schema: Mapping, depth: int) -> bool:
        declared = schema.get("type")
        kinds = [declared] if isinstance(declared, str) else declared
        if isinstance(kinds, list) and kinds and not type_allows(set(kinds), value):
            return False
        for listed in _listed(schema):
            if value_key(value) not in {value_key(v) for v in listed}:
                return False
        if not literals_in_range([value], schema, "", strict=False):
            return False
        if not literals_fitting([value], schema, "", self.automata):
            return False
        if isinstance(value, list):
            items = schema.get("items", True)
            if isinstance(items, Mapping | bool):
                return all(self.fits(item, items, depth + 1) for item in value)
            return True
        if isinstance(value, dict):
            return self._object(value, schema, depth)
        return True

    def _object(self, value: dict, schema: Mapping, depth: int) -> bool:
        required = schema.get("required", [])
        if isinstance(required, list) and any(name not in value for name in required):
            return False
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping):
            return True
        extra = schema.get("additionalProperties", True)
        return all(
            self.fits(item, properties.get(name, extra), depth + 1) for name, item in value.items()
        )


def _listed(schema: Mapping) -> list[list]:
    """The value lists ``enum`` and ``const`` set (a malformed ``enum`` is the compiler's)."""
    lists = []
    if isinstance(schema.get("enum"), list):
        lists.append(schema["enum"])
    if "const" in schema:
        lists.append([schema["const"]])
    return lists
