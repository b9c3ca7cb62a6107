"""JSON values as the schema compiler sees them: their type and their compact spelling."""

from __future__ import annotations

import json


def compact_json(value: object) -> bytes:
    """A value as the grammar spells it: compact JSON, UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def json_type_of(value: object) -> str:
    """A value's JSON Schema type; a whole float (``2.0``) is an ``integer``, as JSON Schema
    says."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def type_allows(declared: set[str], value: object) -> bool:
    """Whether ``value`` has one of the ``declared`` types (an integer is a number)."""
    kind = json_type_of(value)
    return kind in declared or (kind == "integer" and "number" in declared)


def value_key(value: object) -> str:
    """A key equal for equal JSON values, as JSON Schema compares them (``1`` is ``1.0``; an
    object's key order does not matter)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, sort_keys=True)
