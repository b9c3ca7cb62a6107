"""The JSON Schema keywords the compiler (schema.py) sorts: those it cannot enforce, the types,
and those that make a combinator's sibling an intersection (schema_merge.py)."""

from __future__ import annotations

from collections.abc import Mapping

from ember.models.constrain.json_values import value_key
from ember.models.constrain.number_schema import BOUND_KEYWORDS

UNSUPPORTED = (
    "multipleOf",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "if",
    "then",
    "else",
    "not",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "prefixItems",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
)
TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
# Keywords that make a schema do more than an anyOf/allOf alone: every keyword the compiler
# enforces (a combinator beside another included). Beside a combinator they are refused
# (strict) or intersected with each alternative (lenient, schema_merge.py); one left out
# here would be dropped silently in both modes.
SHAPING = (
    "type",
    "properties",
    "items",
    "enum",
    "const",
    "additionalProperties",
    "required",
    *BOUND_KEYWORDS,
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "anyOf",
    "oneOf",
    "allOf",
)


def pointer_part(part: str | int) -> str:
    """A property name or index as one JSON-pointer step (RFC 6901: ``~`` and ``/`` escaped)."""
    return str(part).replace("~", "~0").replace("/", "~1")


def listed_values(schema: Mapping, path: str) -> tuple[list | None, str]:
    """The values ``enum`` and ``const`` both allow and the keyword to name (None: a malformed
    ``enum``)."""
    values = schema.get("enum")
    if "enum" in schema and (not isinstance(values, list) or not values):
        return None, path + "/enum"
    if "const" not in schema:
        return values, path + "/enum"
    if values is None:
        return [schema["const"]], path + "/const"
    return [v for v in values if value_key(v) == value_key(schema["const"])], path + "/const"
