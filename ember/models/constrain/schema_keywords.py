"""The JSON Schema keywords the compiler (schema.py) sorts: those it cannot enforce, the types,
and those that make a combinator's sibling an intersection (schema_merge.py)."""

from __future__ import annotations

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
