"""The JSON grammar accepts exactly the texts it should, and refuses what it cannot enforce."""

from __future__ import annotations

import pytest

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.grammar import END, advance, initial_state
from ember.models.constrain.schema import any_json_object, compile_schema


def accepts(schema: object, text: str | bytes) -> bool:
    """Complete match: every byte accepted, then the grammar may end."""
    node = any_json_object() if schema == "json_object" else compile_schema(schema)
    state = initial_state(node)
    for byte in text.encode() if isinstance(text, str) else text:
        state = advance(state, byte)
        if not state:
            return False
    return () in advance(state, END)


OBJECT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age"],
}


@pytest.mark.parametrize(
    ("schema", "text", "expected"),
    [
        (OBJECT, '{"name":"Ada","age":36}', True),
        (OBJECT, '{"name": "Ada", "age": 36, "tags": ["x", "y"]}', True),
        (OBJECT, '{\n  "name": "Ada",\n  "age": 36\n}', True),
        (OBJECT, '{"age":36,"name":"Ada"}', False),  # declared order only
        (OBJECT, '{"name":"Ada"}', False),  # required age missing
        (OBJECT, '{"name":"Ada","age":36,"other":1}', False),  # no additional properties
        (OBJECT, '{"name":"Ada","age":36.5}', False),  # integer
        (OBJECT, '{"name":"Ada","age":036}', False),  # leading zero
        (OBJECT, '{"name":"Ada","age":36,}', False),  # trailing comma
        (OBJECT, '{"name":"Ada","age":36} ', False),  # nothing after the value
        ({"type": "string"}, '"a\\"b\\\\c\\/\\n\\u00e9"', True),
        ({"type": "string"}, '"\\ud83d\\ude00"', False),  # surrogate escapes refused
        ({"type": "string"}, '"\\x"', False),
        ({"type": "string"}, '"tab\there"', False),  # raw control character
        ({"type": "string"}, '"naïve 日本 🙂"', True),
        ({"type": "string"}, b'"\xc3"', False),  # truncated UTF-8
        ({"type": "string"}, b'"\xed\xa0\x80"', False),  # UTF-8-encoded surrogate
        ({"type": "string"}, b'"\xe0\x80\xaf"', False),  # overlong
        ({"type": "string", "minLength": 2, "maxLength": 3}, '"ab"', True),
        ({"type": "string", "minLength": 2, "maxLength": 3}, '"a"', False),
        ({"type": "string", "minLength": 2, "maxLength": 3}, '"abcd"', False),
        ({"type": "string", "maxLength": 2}, '"\\né"', True),  # escapes and UTF-8 count once
        ({"type": "number"}, "-0.5e+10", True),
        ({"type": "number"}, "1.", False),
        ({"type": "number"}, ".5", False),
        ({"type": "number"}, "1" * 16, False),  # digit cap
        ({"type": "number"}, "1e99", True),
        ({"type": "number"}, "1e999", False),  # would parse as infinity
        ({"type": "integer"}, "-7", True),
        ({"type": "integer"}, "1e3", False),
        ({"enum": ["red", 2, None, {"a": [1]}]}, '"red"', True),
        ({"enum": ["red", 2, None, {"a": [1]}]}, '{"a":[1]}', True),
        ({"enum": ["red", 2, None, {"a": [1]}]}, "3", False),
        ({"enum": [1, 12]}, "1", True),
        ({"enum": [1, 12]}, "12", True),
        ({"const": "x"}, '"x"', True),
        ({"type": ["string", "null"]}, "null", True),
        ({"type": ["string", "null"]}, '"s"', True),
        ({"type": "string", "nullable": True}, "null", True),
        (
            {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "boolean"}}]},
            "[true,false]",
            True,
        ),
        (
            {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "boolean"}}]},
            '"s"',
            False,
        ),
        ({"type": "array", "minItems": 1, "maxItems": 2}, "[]", False),
        ({"type": "array", "minItems": 1, "maxItems": 2}, "[1, {}]", True),
        ({"type": "array", "minItems": 1, "maxItems": 2}, "[1,2,3]", False),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, '{"a":1,"b":2}', True),
        (
            {"type": "object", "properties": {"a": {}}, "additionalProperties": True},
            '{"a":1,"a":2}',
            False,
        ),
        ({"type": "object", "properties": {'a"b': {"type": "null"}}}, '{"a\\"b":null}', True),
        (
            {
                "$defs": {
                    "node": {
                        "type": "object",
                        "properties": {
                            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                        },
                    }
                },
                "$ref": "#/$defs/node",
            },
            '{"kids":[{"kids":[]},{}]}',
            True,
        ),
        ({}, '[1, "two", {"three": null}]', True),
        ("json_object", '{"x": [1, {"y": "z"}], "w": false}', True),
        ("json_object", "[1]", False),
        ({"type": "boolean"}, "true", True),
        ({"type": "boolean"}, "True", False),
    ],
)
def test_grammar_accepts_exactly(schema: object, text: str, expected: bool) -> None:
    assert accepts(schema, text) is expected


def test_whitespace_runs_are_bounded() -> None:
    assert accepts({"type": "array"}, "[" + " " * 20 + "1]")
    assert not accepts({"type": "array"}, "[" + " " * 21 + "1]")


@pytest.mark.parametrize(
    ("schema", "field", "message"),
    [
        (
            {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^(?=9)\\d$"}}},
            "/s/properties/zip/pattern",
            "Invalid value at '/s/properties/zip/pattern': expected a regular expression in "
            "ember's subset (literals, escapes, '.', classes, \\d \\w \\s, quantifiers, groups, "
            "alternation, '^' and '$' at the ends), got lookahead (?= at offset 1 in "
            "'^(?=9)\\\\d$'",
        ),
        (
            {"type": "integer", "multipleOf": 5},
            "/s/multipleOf",
            "Invalid value at '/s/multipleOf': expected a schema keyword ember can enforce while "
            "generating (see the supported JSON Schema subset; ember refuses one it cannot "
            "enforce rather than miss it silently, even where OpenAI's strict mode takes it: "
            "drop it, or set strict to false), got 'multipleOf'",
        ),
        (
            {"type": "object", "required": ["a"]},
            "/s/required/0",
            "Invalid value at '/s/required/0': expected the name of a property declared in "
            "'properties', got a",
        ),
        (
            {"type": "strin"},
            "/s/type",
            "Invalid value at '/s/type': expected one of object, array, "
            "string, number, integer, boolean, null, got strin",
        ),
        (
            {"$ref": "https://example.com/s.json"},
            "/s/$ref",
            "Invalid value at '/s/$ref': expected a "
            "local reference like '#/$defs/Name', got https://example.com/s.json",
        ),
        (
            {"allOf": [{"type": "string"}, {"maxLength": 3}]},
            "/s/allOf",
            "Invalid value at '/s/allOf': expected allOf with a single schema, got 2 schemas",
        ),
        (
            {"type": "array", "maxItems": 1, "minItems": 2},
            "/s/maxItems",
            "Invalid value at '/s/maxItems': expected at least minItems (2), got 1",
        ),
        (False, "/s", "Invalid value at '/s': expected a schema some value can satisfy, got false"),
    ],
)
def test_unsupported_or_broken_schemas_name_the_keyword(
    schema: object, field: str, message: str
) -> None:
    with pytest.raises(InvalidRequestField) as caught:
        compile_schema(schema, path="/s")
    assert caught.value.field == field
    assert str(caught.value) == message


def test_lenient_mode_ignores_value_constraints() -> None:
    node = compile_schema({"type": "integer", "multipleOf": 5}, strict=False)
    state = initial_state(node)
    for byte in b"-42":
        state = advance(state, byte)
    assert () in advance(state, END)
