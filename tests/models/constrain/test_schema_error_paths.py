"""Every schema error names the place in the request where the offending keyword is, however
deep it is nested (a user fixes the schema by that path)."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.errors import InvalidRequestField

ROOT = "/response_format/json_schema/schema"
NESTED = "/properties/a/properties/b"


def _nested(inner: dict) -> dict:
    return {
        "type": "object",
        "properties": {"a": {"type": "object", "properties": {"b": inner}}},
        "$defs": {"Name": {"type": "string"}},
    }


@pytest.mark.parametrize(
    ("inner", "where"),
    [
        ({"$ref": "#/nope"}, "/$ref"),
        ({"$ref": "#/$defs/Missing"}, "/$ref"),
        ({"$ref": "https://example.com/s.json"}, "/$ref"),
        ({"type": "integer", "multipleOf": 2}, "/multipleOf"),
        ({"type": "integer", "minimum": 5, "maximum": 0}, "/maximum"),
        ({"type": "string", "pattern": "a(?!b)"}, "/pattern"),
        ({"type": "string", "pattern": 7}, "/pattern"),
        ({"type": "array", "items": {"type": "nope"}}, "/items/type"),
        ({"anyOf": []}, "/anyOf"),
        ({"allOf": [{"type": "string"}, {"type": "number"}]}, "/allOf"),
        ({"anyOf": [{"type": "string"}], "type": "string"}, "/type"),
        (False, ""),
    ],
)
def test_error_names_the_nested_keyword(inner: object, where: str) -> None:
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": _nested(inner), "strict": True},
        },
    }
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(body)
    assert caught.value.field == ROOT + NESTED + where


def test_a_ref_to_a_ref_to_nowhere_names_the_second_ref() -> None:
    """A $ref chain: the broken link is the $ref inside the target, at the target's path."""
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"type": "object", "properties": {"b": {"$ref": "#/nope"}}}},
    }
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    }
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(body)
    assert caught.value.field == ROOT + "/$defs/A/properties/b/$ref"


def _chat(schema: object) -> dict:
    return {
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    }


def test_too_many_enum_values_are_refused_naming_the_limit() -> None:
    """An enum of 50,000 strings took 14.6 s to compile on the engine's thread, stalling every
    other request's decoding; OpenAI's structured outputs bound enum values the same way."""
    from ember.models.constrain.schema import MAX_LITERAL_BYTES, MAX_LITERALS

    huge = {"type": "object", "properties": {"a": {"enum": [f"v{i}" * 20 for i in range(50000)]}}}
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(_chat(huge))
    assert caught.value.field == ROOT + "/properties/a/enum"
    assert f"at most {MAX_LITERALS} enum and const values" in str(caught.value)
    # Across the schema: many enums each under the bound still add up.
    spread = {
        "type": "object",
        "properties": {f"p{i}": {"enum": list(range(200))} for i in range(6)},
    }
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(_chat(spread))
    assert caught.value.field == ROOT + "/properties/p5/enum"
    # And the values' size: a few long strings.
    long = {"enum": ["x" * (MAX_LITERAL_BYTES // 4)] * 5}
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(_chat(long))
    assert f"{MAX_LITERAL_BYTES:,} bytes" in str(caught.value)
    # Within both, it compiles.
    parse_chat_request(_chat({"enum": [f"v{i}" for i in range(MAX_LITERALS)]}))
