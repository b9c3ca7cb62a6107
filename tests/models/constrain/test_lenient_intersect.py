"""Lenient combinators intersect their siblings (review32 #1, #2): an alternative's keyword
narrows the sibling's instead of replacing it, an empty intersection leaves the alternative out,
and a valid schema is never refused. jsonschema is the oracle for every text."""

from __future__ import annotations

import json

import jsonschema
import pytest

from ember.models.constrain.schema import compile_schema
from tests.models.constrain.fixtures import grammar_accepts

TYPE_BESIDE = {"type": "string", "anyOf": [{"type": "integer"}, {"maxLength": 3}]}
LENGTH_BESIDE = {
    "type": "string",
    "maxLength": 3,
    "anyOf": [{"maxLength": 10}, {"pattern": "^x"}],
}
PROPERTY_BESIDE = {
    "type": "object",
    "properties": {"a": {"type": "string"}},
    "anyOf": [{"properties": {"a": {"type": "integer"}}}, {"required": ["a"]}],
}
BOUNDS_BESIDE = {
    "type": "integer",
    "minimum": 0,
    "maximum": 9,
    "anyOf": [{"maximum": 100}, {"exclusiveMinimum": 5}],
}
ENUM_AND_LENGTH = {"enum": ["a", "abcd"], "anyOf": [{"maxLength": 3}]}
ENUMS = {"enum": ["a", "b", 1], "anyOf": [{"enum": ["b", "c", 1.0]}, {"const": "z"}]}
CLOSED_OBJECT = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "additionalProperties": False,
    "anyOf": [{"properties": {"b": {"type": "string"}}}, {"required": ["a"]}],
}
NUMBER_AND_INTEGER = {"type": "number", "anyOf": [{"type": ["integer", "string"]}]}
ITEMS_BESIDE = {
    "type": "array",
    "items": {"type": "string"},
    "maxItems": 2,
    "anyOf": [{"items": {"maxLength": 1}, "maxItems": 5}],
}
# (jsonschema does not read OpenAPI's nullable, so only a value both readings refuse is asked.)
NULLABLE_BESIDE = {"type": "string", "nullable": True, "anyOf": [{"type": ["null", "integer"]}]}

CASES = [
    (TYPE_BESIDE, "5"),
    (TYPE_BESIDE, '"abc"'),
    (TYPE_BESIDE, '"abcd"'),
    (LENGTH_BESIDE, '"abcdefgh"'),
    (LENGTH_BESIDE, '"abc"'),
    (LENGTH_BESIDE, '"xyzzy"'),
    (PROPERTY_BESIDE, '{"a":5}'),
    (PROPERTY_BESIDE, '{"a":"s"}'),
    (PROPERTY_BESIDE, "{}"),
    (BOUNDS_BESIDE, "10"),
    (BOUNDS_BESIDE, "9"),
    (BOUNDS_BESIDE, "0"),
    (ENUM_AND_LENGTH, '"abcd"'),
    (ENUM_AND_LENGTH, '"a"'),
    (ENUMS, '"a"'),
    (ENUMS, '"b"'),
    (ENUMS, '"c"'),
    (ENUMS, '"z"'),
    (ENUMS, "1"),
    (CLOSED_OBJECT, '{"b":"x"}'),
    (CLOSED_OBJECT, '{"a":1}'),
    (CLOSED_OBJECT, "{}"),
    (NUMBER_AND_INTEGER, "1"),
    (NUMBER_AND_INTEGER, "1.5"),
    (NUMBER_AND_INTEGER, '"s"'),
    (ITEMS_BESIDE, '["a","b"]'),
    (ITEMS_BESIDE, '["ab"]'),
    (ITEMS_BESIDE, '["a","b","c"]'),
    (ITEMS_BESIDE, "[1]"),
    (NULLABLE_BESIDE, "1"),
    (NULLABLE_BESIDE, '"s"'),
]


@pytest.mark.parametrize(("schema", "text"), CASES)
def test_the_grammar_takes_what_the_schema_allows(schema: dict, text: str) -> None:
    valid = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
    node = compile_schema(schema, path="/p", strict=False)
    assert grammar_accepts(node, text) is valid


VALID_SCHEMAS = [
    # An alternative forbidding a property the siblings require.
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "anyOf": [{"properties": {"a": False}}, {"properties": {"a": {"minimum": 3}}}],
    },
    # required naming a property that only additionalProperties (absent: any value) declares.
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b"]},
]


@pytest.mark.parametrize("schema", VALID_SCHEMAS)
def test_lenient_never_refuses_a_valid_schema(schema: dict) -> None:
    node = compile_schema(schema, path="/p", strict=False)  # each was a 400
    for text in ("{}", '{"a":1}', '{"a":5}', '{"a":1,"b":2}', '{"b":2}'):
        if grammar_accepts(node, text):
            assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text


def test_an_alternative_no_object_can_match_is_left_out() -> None:
    # A required name additionalProperties false forbids: no value is valid, the only
    # alternative is left out and the anyOf ignored (documented), the siblings still hold.
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": False,
        "anyOf": [{"required": ["b"]}],
    }
    node = compile_schema(schema, path="/p", strict=False)  # a 400 before
    assert grammar_accepts(node, '{"a":1}')
    assert not grammar_accepts(node, '{"b":1}')


def test_a_forbidden_property_is_never_generated() -> None:
    schema = {
        "type": "object",
        "properties": {"a": False, "b": {"type": "integer"}},
        "additionalProperties": True,
    }
    node = compile_schema(schema, path="/p", strict=False)
    assert grammar_accepts(node, '{"b":1}')
    assert not grammar_accepts(node, '{"a":1}')
    assert not grammar_accepts(node, '{"b":1,"a":1}')


def test_a_required_undeclared_property_takes_additional_properties_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": {"type": "string"},
        "required": ["b"],
    }
    node = compile_schema(schema, path="/p", strict=False)
    assert grammar_accepts(node, '{"b":"x"}')
    assert not grammar_accepts(node, '{"b":1}')
    assert not grammar_accepts(node, '{"a":1}')
