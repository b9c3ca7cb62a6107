"""A GLM value whose schema allows a string among other types is written either raw (the
string) or as JSON (the rest), and the grammar and the output parser agree on which it is: raw
text is typed as a non-string value only where the grammar's JSON branch takes it, so every
call the grammar allows parses to arguments its schema accepts (review32). ``enum``/``const``
beside such a type list hold in the raw branch too, and a strict tool refuses on GLM what it
refuses on Kimi, naming the same keyword."""

from __future__ import annotations

import json

import jsonschema
import pytest

from ember.models.api.errors import InvalidRequestField
from ember.models.api.output_parser import parse_output
from ember.models.constrain.session import ConstraintSpec, build_root
from ember.models.constrain.tool_grammars import ToolSignature
from tests.models.constrain.fixtures import small_vocab, standard_schema
from tests.models.constrain.test_tool_grammars import _accepts

IDS = small_vocab().special_ids


def _parameters(value_schema: object) -> dict:
    return {
        "type": "object",
        "$defs": {"S": {"type": "string", "maxLength": 2}},
        "properties": {"v": value_schema},
        "required": ["v"],
    }


def _spec(parameters: dict, *, strict: bool = False, tool_format: str = "glm47") -> ConstraintSpec:
    return ConstraintSpec(
        tools=(ToolSignature("f", parameters, strict),),
        tools_required=True,
        tool_format=tool_format,  # type: ignore[arg-type]
    )


def _call(written: str) -> str:
    return f"<tool_call>f<arg_key>v</arg_key><arg_value>{written}</arg_value></tool_call>"


def _parsed(parameters: dict, written: str) -> object:
    calls = parse_output(_call(written), "glm47", tools={"f": parameters}).tool_calls
    return json.loads(calls[0].arguments)["v"]


@pytest.mark.parametrize(
    ("value_schema", "written", "allowed"),
    [
        ({"type": ["string", "boolean"], "enum": ["a", True]}, "a", True),
        ({"type": ["string", "boolean"], "enum": ["a", True]}, "true", True),
        ({"type": ["string", "boolean"], "enum": ["a", True]}, "b", False),
        ({"type": ["string", "boolean"], "enum": ["a", True]}, "false", False),
        ({"type": ["integer", "string"], "enum": [1, "x"]}, "x", True),
        ({"type": ["integer", "string"], "enum": [1, "x"]}, "1", True),
        ({"type": ["integer", "string"], "enum": [1, "x"]}, "y", False),
        ({"type": ["integer", "string"], "enum": [1, "x"]}, "2", False),
        ({"type": ["string", "null"], "const": "a"}, "a", True),
        ({"type": ["string", "null"], "const": "a"}, "ab", False),
        ({"type": ["string", "null"], "const": None}, "null", True),
        ({"type": ["string", "null"], "const": None}, "x", False),
    ],
)
@pytest.mark.parametrize("strict", [False, True])
def test_enum_and_const_hold_in_the_raw_branch(
    value_schema: dict, written: str, allowed: bool, strict: bool
) -> None:
    parameters = _parameters(value_schema)
    assert _accepts(_spec(parameters, strict=strict), _call(written), IDS) is allowed


# (value schema, raw text the grammar allows, the value it must parse to)
TYPED = [
    ({"type": ["string", "integer"]}, "1.5", "1.5"),  # no integer widened to a number
    ({"type": ["string", "integer"]}, "7", 7),
    ({"type": ["string", "integer"], "minimum": 10}, "5", "5"),  # out of the integer's range
    ({"type": ["string", "integer"], "minimum": 10}, "12", 12),
    ({"type": ["string", "integer"], "maximum": 3}, "12345", "12345"),
    ({"type": ["integer", "string"], "enum": [1, "2"]}, "2", "2"),
    ({"type": ["integer", "string"], "enum": [1, "2"]}, "1", 1),
    ({"type": ["string", "boolean"], "enum": ["true", False]}, "true", "true"),
    ({"type": ["string", "boolean"], "enum": ["true", False]}, "false", False),
    ({"type": ["string", "integer"], "pattern": '^"'}, '"ab"', '"ab"'),
    ({"type": ["string", "number"], "pattern": "^1", "maximum": 3}, "12", "12"),
    ({"type": ["string", "number"], "pattern": "^1", "maximum": 3}, "2.5", 2.5),
    ({"type": ["string", "null"], "enum": ["a", None]}, "null", None),
    ({"anyOf": [{"$ref": "#/$defs/S"}, {"type": "integer", "minimum": 5}]}, '"3"', "3"),
    ({"anyOf": [{"$ref": "#/$defs/S"}, {"type": "integer", "minimum": 5}]}, "30", 30),
]


@pytest.mark.parametrize(("value_schema", "written", "value"), TYPED)
def test_raw_text_is_typed_as_the_grammar_took_it(
    value_schema: dict, written: str, value: object
) -> None:
    parameters = _parameters(value_schema)
    assert _accepts(_spec(parameters), _call(written), IDS)
    parsed = _parsed(parameters, written)
    assert parsed == value and type(parsed) is type(value)
    validator = jsonschema.Draft202012Validator(standard_schema(parameters))
    assert validator.is_valid({"v": parsed})


# What the strict JSON path (Kimi, response_format) refuses, and the keyword it names.
REFUSED = [
    ({"type": "string", "anyOf": [{"maxLength": 2}, {"pattern": "^x"}]}, "properties/v/type"),
    ({"type": "string", "allOf": [{"maxLength": 2}, {"minLength": 1}]}, "properties/v/allOf"),
    ({"type": "string", "not": {"const": "abc"}}, "properties/v/not"),
    ({"type": ["string", "integer"], "multipleOf": 2}, "properties/v/multipleOf"),
]
ROOTS = [
    ({"allOf": [{"required": ["a"]}, {"required": ["b"]}]}, "allOf"),
    ({"minProperties": 1}, "minProperties"),
    ({"not": {"required": ["a"]}}, "not"),
]


def _root(extra: dict) -> dict:
    properties = {"a": {"type": "string"}, "b": {"type": "string"}}
    return {"type": "object", "properties": properties, **extra}


@pytest.mark.parametrize(
    ("parameters", "keyword"),
    [(_parameters(s), k) for s, k in REFUSED] + [(_root(e), k) for e, k in ROOTS],
)
@pytest.mark.parametrize("tool_format", ["kimi", "glm45", "glm47"])
def test_a_strict_tool_refuses_the_same_keywords_on_every_family(
    parameters: dict, keyword: str, tool_format: str
) -> None:
    with pytest.raises(InvalidRequestField) as refused:
        build_root(_spec(parameters, strict=True, tool_format=tool_format), IDS)
    assert refused.value.field == f"/tools/0/function/parameters/{keyword}"
    build_root(_spec(parameters, strict=False, tool_format=tool_format), IDS)  # a hint: taken
