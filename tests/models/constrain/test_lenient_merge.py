"""Lenient combinators with siblings (review30 #2, #3): a valid schema is never refused because
merging made an alternative contradict its siblings, a sibling's own error is named where it is
in the request, and nested merges share the siblings instead of copying them per branch."""

from __future__ import annotations

import json

import jsonschema
import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.schema import compile_schema
from tests.models.constrain.fixtures import grammar_accepts

ENUM_BESIDE = {"enum": ["a"], "anyOf": [{"type": "string"}, {"type": "integer"}]}
REQUIRED_BESIDE = {
    "type": "object",
    "required": ["a"],
    "anyOf": [
        {"properties": {"a": {"type": "string"}}},
        {"properties": {"b": {"type": "string"}}},
    ],
}


def _tool_request(parameters: dict) -> dict:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "tool_choice": "required",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}],
    }


@pytest.mark.parametrize(
    ("schema", "text", "valid"),
    [
        (ENUM_BESIDE, '"a"', True),
        (ENUM_BESIDE, '"b"', False),
        (REQUIRED_BESIDE, '{"a":"x"}', True),
        (REQUIRED_BESIDE, "{}", False),
    ],
)
def test_an_alternative_contradicting_its_siblings_is_left_out(
    schema: dict, text: str, valid: bool
) -> None:
    node = compile_schema(schema, path="/p", strict=False)  # a 400 before, at a merged path
    assert grammar_accepts(node, text) is valid
    assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)) is valid
    parse_chat_request(_tool_request({"type": "object", "properties": {"x": schema}}))


def test_when_no_alternative_fits_the_combinator_is_ignored() -> None:
    schema = {"enum": ["a", 1], "anyOf": [{"type": "boolean"}, {"type": "null"}]}
    node = compile_schema(schema, path="/p", strict=False)
    assert (
        grammar_accepts(node, '"a"')
        and grammar_accepts(node, "1")
        and not grammar_accepts(node, "true")
    )


def test_a_siblings_own_error_is_named_at_its_path() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"type": "text"}},
        "anyOf": [{"required": ["x"]}, {"properties": {"x": {"type": "string"}}}],
    }
    with pytest.raises(InvalidRequestField) as refused:
        compile_schema(schema, path="/p", strict=False)
    assert refused.value.field == "/p/properties/x/type"  # not /p/anyOf/0/properties/x/type


def test_an_alternatives_own_error_is_still_a_400() -> None:
    schema = {"type": "object", "anyOf": [{"type": "text"}, {"required": []}]}
    with pytest.raises(InvalidRequestField) as refused:
        compile_schema(schema, path="/p", strict=False)
    assert refused.value.field == "/p/anyOf/0/type"


def _nest(depth: int, branches: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {
            "type": "object",
            "properties": {"x": schema},
            "required": ["x"],
            "anyOf": [{"title": f"v{j}"} for j in range(branches)],
        }
    return schema


@pytest.mark.parametrize(("depth", "branches"), [(13, 2), (8, 3)])
def test_nested_merges_share_their_siblings(depth: int, branches: int) -> None:
    # branches ** depth copies passed the 5000-subschema bound (a 400) before.
    schema = _nest(depth, branches)
    node = compile_schema(schema, path="/p", strict=False)
    value = '"s"'
    for _ in range(depth):
        value = '{"x":' + value + "}"
    assert grammar_accepts(node, value) and not grammar_accepts(node, value.replace('"s"', "1"))
    parse_chat_request(_tool_request({"type": "object", "properties": {"n": schema}}))
