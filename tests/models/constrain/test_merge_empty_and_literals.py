"""Review33: bounds met to an empty range, keywords beside a combinator, enum/const values
checked against the whole schema. jsonschema judges every value the grammar takes."""

from __future__ import annotations

import json

import jsonschema
import pytest

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.schema import compile_schema
from tests.models.constrain.fixtures import grammar_accepts, standard_schema


def _valid(schema: dict, value: object) -> bool:
    validator = jsonschema.Draft202012Validator(
        standard_schema(schema), format_checker=jsonschema.FormatChecker()
    )
    return validator.is_valid(value)


def _grammar_agrees(schema: dict, texts: list[str], *, strict: bool = False) -> None:
    node = compile_schema(schema, path="/p", strict=strict)
    for text in texts:
        if grammar_accepts(node, text):
            assert _valid(schema, json.loads(text)), f"grammar takes invalid {text}"


@pytest.mark.parametrize(
    ("schema", "texts"),
    [
        # Two sound bounds meeting into an empty range: the alternative holds no number.
        (
            {"type": "integer", "minimum": 5, "anyOf": [{"maximum": 3}, {"maximum": 10}]},
            ["7", "-100", "99999"],
        ),
        (
            {"type": "number", "maximum": 2, "anyOf": [{"minimum": 3}, {"minimum": 0}]},
            ["1.5", "100", "-7"],
        ),
        (
            {
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 1}},
                "anyOf": [
                    {"properties": {"n": {"maximum": 0}}},
                    {"properties": {"n": {"maximum": 5}}},
                ],
            },
            ['{"n":3}', '{"n":-4}', '{"n":500}'],
        ),
        # Only the type whose range is empty leaves the list.
        (
            {
                "type": ["integer", "string"],
                "minimum": 5,
                "anyOf": [{"maximum": 3}, {"type": "string"}],
            },
            ['"x"', "-3", "50"],
        ),
        (
            {"type": "integer", "minimum": 0.2, "anyOf": [{"maximum": 0.8}, {"maximum": 5}]},
            ["0", "1", "7"],
        ),
        (
            {"type": "string", "minLength": 5, "anyOf": [{"maxLength": 3}, {"maxLength": 8}]},
            ['"ab"', '"abcdef"', '"abcdefghijk"'],
        ),
        # Two known formats: only "string" leaves, the integer alternative stays.
        (
            {
                "type": ["string", "integer"],
                "format": "date",
                "anyOf": [{"format": "uuid"}, {"type": "string"}],
            },
            ["7", '"x"', "true"],
        ),
    ],
)
def test_met_bounds_that_hold_no_value_drop_only_that_type(schema: dict, texts: list[str]) -> None:
    _grammar_agrees(schema, texts)
    node = compile_schema(schema, path="/p", strict=False)
    assert any(grammar_accepts(node, t) for t in texts)  # what is valid still is generated


def test_format_clash_keeps_the_other_types_of_the_alternative() -> None:
    schema = {
        "type": ["string", "integer"],
        "format": "date",
        "anyOf": [{"format": "uuid"}, {"type": "string"}],
    }
    assert grammar_accepts(compile_schema(schema, path="/p", strict=False), "7")


def test_lenient_empty_range_is_refused_not_ignored() -> None:
    with pytest.raises(InvalidRequestField, match="/p/maximum"):
        compile_schema({"type": "number", "maximum": 2, "minimum": 3}, path="/p", strict=False)
    # Beside enum, lenient keeps no number from an empty range (the strings stay).
    node = compile_schema({"enum": [1, "a"], "minimum": 3, "maximum": 2}, path="/p", strict=False)
    assert grammar_accepts(node, '"a"') and not grammar_accepts(node, "1")


SIBLINGS = [
    ({"maxLength": 3, "anyOf": [{"type": "string"}, {"type": "null"}]}, '"abcdefgh"', '"ab"'),
    ({"pattern": "^a", "anyOf": [{"type": "string"}, {"type": "null"}]}, '"zzz"', '"abc"'),
    ({"format": "date", "anyOf": [{"type": "string"}, {"type": "null"}]}, '"zzz"', '"2024-01-02"'),
    ({"minLength": 2, "oneOf": [{"type": "string"}, {"type": "null"}]}, '"a"', '"ab"'),
    ({"maxItems": 1, "anyOf": [{"type": "array"}, {"type": "null"}]}, "[1,2,3]", "[1]"),
    ({"minItems": 2, "anyOf": [{"type": "array"}, {"type": "null"}]}, "[1]", "[1,2]"),
]


@pytest.mark.parametrize(("schema", "invalid", "valid"), SIBLINGS)
def test_keywords_beside_a_combinator_hold_lenient(schema: dict, invalid: str, valid: str) -> None:
    node = compile_schema(schema, path="/p", strict=False)
    assert not _valid(schema, json.loads(invalid)) and not grammar_accepts(node, invalid)
    assert _valid(schema, json.loads(valid)) and grammar_accepts(node, valid)


# A second combinator beside the first: strict refuses it. Lenient merges it into each
# alternative, but an alternative all of whose inner alternatives contradict it falls back
# to ignoring the inner combinator (documented), so it is not in SIBLINGS.
TWO_COMBINATORS = (
    {"anyOf": [{"type": "string"}, {"type": "integer"}], "allOf": [{"type": "integer"}]},
    '"x"',
    "3",
)


@pytest.mark.parametrize(("schema", "invalid", "valid"), [*SIBLINGS, TWO_COMBINATORS])
def test_keywords_beside_a_combinator_are_refused_strict(
    schema: dict, invalid: str, valid: str
) -> None:
    sibling = next(k for k in schema if k not in ("anyOf", "oneOf"))
    with pytest.raises(InvalidRequestField, match=f"/p/{sibling}"):
        compile_schema(schema, path="/p", strict=True)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "array", "items": {"const": 3}, "enum": [[1], [3]]}, [1]),
        (
            {"type": "object", "properties": {"a": {"type": "boolean"}}, "enum": [{"a": 1}, {}]},
            {"a": 1},
        ),
        (
            {
                "type": "object",
                "required": ["b"],
                "properties": {"b": {"type": "integer"}},
                "enum": [{"a": 1}, {"b": 1}],
            },
            {"a": 1},
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "additionalProperties": False,
                "enum": [{"z": 1}, {"a": 1}],
            },
            {"z": 1},
        ),
        (
            {
                "$defs": {"Small": {"type": "integer", "maximum": 2}},
                "type": "array",
                "items": {"$ref": "#/$defs/Small"},
                "enum": [[5], [1]],
            },
            [5],
        ),
    ],
)
def test_enum_values_are_checked_against_items_and_properties(
    schema: dict, value: object, strict: bool
) -> None:
    node = compile_schema(schema, path="/p", strict=strict)
    assert not _valid(schema, value)
    assert not grammar_accepts(node, json.dumps(value, separators=(",", ":")))
    kept = [v for v in schema["enum"] if v != value]
    assert all(grammar_accepts(node, json.dumps(v, separators=(",", ":"))) for v in kept)


def test_enum_object_keys_in_any_order_and_undeclared_keys_stay() -> None:
    # JSON Schema's reading: properties in any order, other keys allowed when
    # additionalProperties is absent; the literal is written as listed.
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {}},
        "enum": [{"b": 1, "a": 2}, {"c": True}],
    }
    node = compile_schema(schema, path="/p", strict=True)
    assert grammar_accepts(node, '{"b":1,"a":2}') and grammar_accepts(node, '{"c":true}')


def test_enum_beside_const_keeps_the_values_both_allow() -> None:
    for schema in ({"enum": [1, 2], "const": 2}, {"type": "integer", "enum": [5, 1], "const": 1}):
        node = compile_schema(schema, path="/p", strict=True)
        assert not grammar_accepts(node, str(schema["enum"][0]))
        assert grammar_accepts(node, str(schema["const"]))
    with pytest.raises(InvalidRequestField, match="/p/const"):
        compile_schema({"enum": [5, 1], "const": 3}, path="/p", strict=False)
    merged = {"type": "integer", "anyOf": [{"enum": [5, 1], "const": 3}, {"const": 7}]}
    with pytest.raises(InvalidRequestField, match="/p/anyOf/0/const"):
        compile_schema(merged, path="/p", strict=False)


def test_nullable_enum_keeps_null_when_merged() -> None:
    schema = {
        "type": "string",
        "nullable": True,
        "enum": ["a"],
        "anyOf": [{"minLength": 1}, {"maxLength": 5}],
    }
    unmerged = {k: v for k, v in schema.items() if k != "anyOf"}
    for s in (unmerged, schema):
        node = compile_schema(s, path="/p", strict=False)
        assert grammar_accepts(node, "null") and grammar_accepts(node, '"a"')
        assert not grammar_accepts(node, '"b"')
