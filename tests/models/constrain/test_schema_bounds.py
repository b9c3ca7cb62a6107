"""What one schema may hold (review26): reference cycles that no value can end are refused
where the ``$ref`` is, and property names count against the schema's 120,000 bytes of names
and values, as OpenAI's structured outputs count them."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.grammar import END, advance, initial_state
from ember.models.constrain.schema import MAX_LITERAL_BYTES, compile_schema

ROOT = "/response_format/json_schema/schema"


def _chat(schema: object) -> dict:
    return {
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    }


def _refused(schema: object) -> InvalidRequestField:
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(_chat(schema))
    return caught.value


CYCLE = {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        # review26 p14/p15: compiled, then "grammar allows no token... dead end" (a 500).
        ({"$defs": CYCLE, "$ref": "#/$defs/a"}, "/$ref"),
        # An optional property leading into the cycle: the model could start it and be stuck.
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "$defs": CYCLE},
            "/properties/x/$ref",
        ),
        # Every value needs a value inside it, forever.
        (
            {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]},
            "/properties/next/$ref",
        ),
        ({"type": "array", "items": {"$ref": "#"}, "minItems": 1}, "/items/$ref"),
        (
            {"anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}], "$defs": CYCLE},
            "/anyOf/0/$ref",
        ),
    ],
)
def test_a_reference_cycle_no_value_ends_is_refused_naming_the_ref(
    schema: dict, field: str
) -> None:
    error = _refused(schema)
    assert error.field == ROOT + field
    assert "a $ref some finite value can match" in str(error)


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        (
            {"type": "object", "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}}},
            '{"next":{"next":{}},"v":1}',
        ),
        ({"type": "array", "items": {"$ref": "#"}}, "[[],[[]]]"),
        ({"anyOf": [{"$ref": "#"}, {"type": "null"}]}, "null"),
        (
            {
                "$defs": {
                    "x": {"anyOf": [{"$ref": "#/$defs/y"}, {"type": "integer"}]},
                    "y": {"anyOf": [{"$ref": "#/$defs/x"}, {"type": "string"}]},
                },
                "$ref": "#/$defs/x",
            },
            '"s"',
        ),
    ],
)
def test_recursive_schemas_that_end_still_compile(schema: dict, text: str) -> None:
    parse_chat_request(_chat(schema))
    state = initial_state(compile_schema(schema))
    for byte in text.encode():
        state = advance(state, byte)
        assert state, text
    assert () in advance(state, END)


def test_property_names_count_against_the_names_and_values_budget() -> None:
    # 50 required names of 2,500 characters: 125,000 bytes of names and no enum at all.
    names = [f"{i:04d}" + "n" * 2496 for i in range(50)]
    schema = {
        "type": "object",
        "properties": {n: {"type": "boolean"} for n in names},
        "required": names,
    }
    error = _refused(schema)
    assert error.field == f"{ROOT}/properties/{names[48]}"
    assert f"property names, enum and const values of at most {MAX_LITERAL_BYTES:,}" in str(error)
    # Names and values share the budget.
    mixed = {
        "type": "object",
        "properties": {"n" * 60_000: {"enum": ["v" * 30_000, "w" * 30_000]}},
    }
    assert _refused(mixed).field == f"{ROOT}/properties/{'n' * 60_000}/enum"
    parse_chat_request(
        _chat(
            {
                **schema,
                "properties": dict(list(schema["properties"].items())[:48]),
                "required": names[:48],
            }
        )
    )
