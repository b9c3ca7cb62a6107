"""Tool parameters keep their root: pydantic's ``$defs``/``$ref`` (and a root ``$ref``) work on
GLM as on Kimi, GLM's values are typed through them, and the keywords beside a lenient
``anyOf``/``oneOf`` hold in every alternative (review26 H2, M3, M4)."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.constraints import constraint_for
from ember.models.api.errors import InvalidRequestField
from ember.models.api.output_parser import ChatOutputParser, parse_output
from ember.models.constrain.schema import compile_schema
from ember.models.constrain.session import ConstraintSpec, GrammarCache
from ember.models.constrain.tool_grammars import ToolSignature, check_glm_arguments
from tests.models.constrain.fixtures import detokenize, grammar_accepts, sample_tokens, small_vocab
from tests.models.constrain.test_tool_grammars import _accepts

SPECIAL = small_vocab()
# What pydantic's model_json_schema() gives for a model with nested models and an enum.
DEFS = {
    "type": "object",
    "$defs": {
        "Unit": {"type": "string", "enum": ["c", "f"]},
        "Loc": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 8}},
            "required": ["city"],
        },
    },
    "properties": {"unit": {"$ref": "#/$defs/Unit"}, "loc": {"$ref": "#/$defs/Loc"}},
    "required": ["unit", "loc"],
}
# A model referred to at the root, as pydantic writes a self-referencing or aliased model.
ROOT_REF = {
    "$ref": "#/$defs/Args",
    "$defs": {
        "Args": {
            "type": "object",
            "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["q"],
        }
    },
}
GLM_FORMATS = ("glm45", "glm47")


def _call_spec(parameters: dict, tool_format: str) -> ConstraintSpec:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}],
        "tool_choice": "required",
    }
    spec = constraint_for(parse_chat_request(body), tool_format=tool_format, reasoning="off")  # type: ignore[arg-type]
    assert spec is not None
    return spec


@pytest.mark.parametrize("tool_format", GLM_FORMATS)
@pytest.mark.parametrize("parameters", [DEFS, ROOT_REF], ids=["defs", "root-ref"])
def test_glm_calls_follow_refs_and_keep_required(tool_format: str, parameters: dict) -> None:
    spec = _call_spec(parameters, tool_format)  # a 400 on GLM before
    rng = random.Random(7)
    for _ in range(6):
        decoder = GrammarCache().decoder(spec, SPECIAL)
        text = detokenize(SPECIAL, sample_tokens(decoder, rng))
        (call,) = parse_output(text, tool_format, tools={"f": parameters}).tool_calls[:1]  # type: ignore[arg-type]
        arguments = json.loads(call.arguments)
        jsonschema.Draft202012Validator(parameters).validate(arguments)


def test_a_root_ref_call_without_its_required_argument_is_refused() -> None:
    spec = ConstraintSpec(tools=(ToolSignature("f", ROOT_REF),), tools_required=True)
    ids = SPECIAL.special_ids
    assert not _accepts(spec, "<tool_call>f</tool_call>", ids)  # the only call it allowed
    assert _accepts(
        spec, "<tool_call>f<arg_key>q</arg_key><arg_value>hi</arg_value></tool_call>", ids
    )


@pytest.mark.parametrize("combinator", ["anyOf", "oneOf"])
def test_a_root_combinator_is_a_400_naming_it_on_glm(combinator: str) -> None:
    shapes = [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]},
    ]
    tool = ToolSignature("f", {combinator: shapes})
    with pytest.raises(InvalidRequestField) as refused:
        check_glm_arguments(tool, "/tools/0/function/parameters")
    assert refused.value.field == f"/tools/0/function/parameters/{combinator}"


def test_a_ref_that_leads_nowhere_or_in_a_circle_is_named() -> None:
    with pytest.raises(InvalidRequestField) as nowhere:
        check_glm_arguments(ToolSignature("f", {"$ref": "#/$defs/Gone"}), "/p")
    assert nowhere.value.field == "/p/$ref"
    with pytest.raises(InvalidRequestField, match="cycle"):
        check_glm_arguments(ToolSignature("f", {"$ref": "#"}), "/p")
    two = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
    with pytest.raises(InvalidRequestField, match="cycle"):
        check_glm_arguments(ToolSignature("f", two), "/p")


def _chain(refs: int, wrapped: bool = False) -> dict:
    """Parameters reached through ``refs`` $refs (the root's first), each under a one-schema
    allOf when ``wrapped``."""

    def hop(i: int) -> dict:
        ref = {"$ref": f"#/$defs/d{i}"}
        return {"allOf": [ref]} if wrapped else ref

    defs: dict = {f"d{i}": hop(i + 1) for i in range(refs - 1)}
    defs[f"d{refs - 1}"] = {"type": "object", "properties": {"x": {"type": "string"}}}
    return {"$defs": defs, **hop(0)}


def test_a_long_chain_of_refs_is_named_as_a_chain_not_a_cycle() -> None:
    # review43: 40 $refs in a row, none met twice, were refused as "a cycle of $refs";
    # review45: 32 were refused too, and allOfs took from the same count.
    for refs, wrapped in [(2, False), (32, False), (17, True), (32, True)]:
        check_glm_arguments(ToolSignature("f", _chain(refs, wrapped)), "/p")
    with pytest.raises(InvalidRequestField) as refused:
        check_glm_arguments(ToolSignature("f", _chain(33)), "/p")
    assert "within 32 $refs" in str(refused.value) and "cycle" not in str(refused.value)
    assert refused.value.field == "/p/$defs/d31/$ref"  # the $ref past the bound


ZIP = {
    "type": "object",
    "$defs": {"Zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
    "properties": {"zip": {"$ref": "#/$defs/Zip"}},
    "required": ["zip"],
}
ZIP_CALL = "<tool_call>lookup<arg_key>zip</arg_key><arg_value>12345</arg_value></tool_call>"


ZIP_AT_ROOT = {
    "$ref": "#/$defs/A",
    "$defs": {
        "A": {"type": "object", "properties": {"zip": {"$ref": "#/$defs/Zip"}}},
        "Zip": {"type": "string", "pattern": "^[0-9]{5}$"},
    },
}

# pydantic v1's shape (and any $ref with a description beside it): allOf of one $ref.
ZIP_ALL_OF = {
    "type": "object",
    "$defs": {"Zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
    "properties": {"zip": {"allOf": [{"$ref": "#/$defs/Zip"}], "description": "postal code"}},
    "required": ["zip"],
}
# A chain of 12 $refs: more levels than the value typing once followed, fewer than MAX_HOPS.
ZIP_CHAIN = {
    "type": "object",
    "$defs": {
        **{f"Z{i}": {"$ref": f"#/$defs/Z{i + 1}"} for i in range(12)},
        "Z12": {"type": "string", "pattern": "^[0-9]{5}$"},
    },
    "properties": {"zip": {"$ref": "#/$defs/Z0"}},
    "required": ["zip"],
}


@pytest.mark.parametrize(
    "parameters",
    [ZIP, ZIP_AT_ROOT, ZIP_ALL_OF, ZIP_CHAIN],
    ids=["defs", "root-ref", "allOf-ref", "ref-chain"],
)
def test_glm_values_are_typed_through_refs_whole_and_streamed(parameters: dict) -> None:
    # The grammar writes the value raw (a string); the parser must agree.
    spec = ConstraintSpec(
        tools=(ToolSignature("lookup", parameters),), tools_required=True, tool_format="glm47"
    )
    assert _accepts(spec, ZIP_CALL, SPECIAL.special_ids)
    whole = parse_output(ZIP_CALL, "glm47", tools={"lookup": parameters})
    assert json.loads(whole.tool_calls[0].arguments) == {"zip": "12345"}  # not the number 12345
    parser = ChatOutputParser("glm47", tools={"lookup": parameters})
    pieces = [parser.feed(ZIP_CALL[i : i + 5]) for i in range(0, len(ZIP_CALL), 5)]
    pieces.append(parser.finish())
    streamed = "".join(
        t.arguments or "" for delta in pieces for t in (delta.tool_calls or ()) if delta
    )
    assert json.loads(streamed) == {"zip": "12345"}


ONE_OF_IDS = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "email": {"type": "string"}},
    "anyOf": [{"required": ["id"]}, {"required": ["email"]}],
}
TYPED_BRANCHES = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "required": ["q"],
    "oneOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"]},
    ],
}


@pytest.mark.parametrize(
    ("schema", "text", "valid"),
    [
        (ONE_OF_IDS, '{"id":1}', True),
        (ONE_OF_IDS, '{"email":"a@b"}', True),
        (ONE_OF_IDS, '{"id":1,"email":"a@b"}', True),
        (ONE_OF_IDS, "{}", False),
        (TYPED_BRANCHES, '{"q":"a","a":1}', True),
        (TYPED_BRANCHES, '{"q":"a","b":true}', True),
        (TYPED_BRANCHES, '{"q":"a"}', False),
        (TYPED_BRANCHES, '{"a":1}', False),  # required q, beside the oneOf
        (TYPED_BRANCHES, "{}", False),
    ],
)
def test_lenient_combinators_keep_their_siblings(schema: dict, text: str, valid: bool) -> None:
    node = compile_schema(schema, path="/p", strict=False)  # the first was a 400 before
    assert grammar_accepts(node, text) is valid
    assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)) is valid


def test_a_ref_alternative_beside_siblings_drops_only_the_combinator() -> None:
    schema = {
        "type": "object",
        "$defs": {"Q": {"required": ["q"]}},
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
        "anyOf": [{"$ref": "#/$defs/Q"}],
    }
    node = compile_schema(schema, path="/p", strict=False)
    assert grammar_accepts(node, '{"q":"a"}') and not grammar_accepts(node, "{}")


LOOKUP_BY_ID_OR_EMAIL = {
    "anyOf": [
        {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]},
    ]
}
PAY = {
    "type": "object",
    "properties": {"amount": {"type": "integer"}},
    "required": ["amount"],
    "additionalProperties": False,
}


def _tool(name: str, parameters: dict, strict: bool = False) -> dict:
    return {
        "type": "function",
        "function": {"name": name, "parameters": parameters, "strict": strict},
    }


def test_a_hint_tool_glm_cannot_follow_gets_free_arguments() -> None:
    # review30 #4: in auto mode beside a strict tool, a non-strict tool with a root anyOf was
    # a 400; OpenAI checks only strict tools' schemas. (Forced, it stays one: the calls the
    # request demands could not follow it.)
    request = parse_chat_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "tools": [_tool("lookup", LOOKUP_BY_ID_OR_EMAIL), _tool("pay", PAY, strict=True)],
        }
    )
    spec = constraint_for(request, tool_format="glm47", reasoning="off")
    assert spec is not None
    ids = SPECIAL.special_ids
    free = "<tool_call>lookup<arg_key>email</arg_key><arg_value>a@b</arg_value></tool_call>"
    assert _accepts(spec, free, ids)
    pay = "<tool_call>pay<arg_key>amount</arg_key><arg_value>{}</arg_value></tool_call>"
    assert _accepts(spec, pay.format(5), ids) and not _accepts(spec, pay.format("five"), ids)


def test_a_strict_tool_glm_cannot_follow_is_still_a_400() -> None:
    request = parse_chat_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "tools": [_tool("lookup", LOOKUP_BY_ID_OR_EMAIL, strict=True)],
        }
    )
    with pytest.raises(InvalidRequestField) as refused:
        constraint_for(request, tool_format="glm47", reasoning="off")
    assert refused.value.field == "/tools/0/function/parameters/anyOf"


@pytest.mark.parametrize(
    ("value_schema", "written", "value"),
    [
        ({"anyOf": [{"type": "string", "maxLength": 5}]}, '"abc"', "abc"),  # JSON, not raw
        ({"type": "string", "nullable": True}, "null", None),  # raw text or JSON null
    ],
)
def test_what_the_glm_grammar_writes_is_what_the_parser_reads(
    value_schema: dict, written: str, value: object
) -> None:
    parameters = {"type": "object", "properties": {"v": value_schema}}
    spec = ConstraintSpec(
        tools=(ToolSignature("f", parameters),), tools_required=True, tool_format="glm47"
    )
    text = f"<tool_call>f<arg_key>v</arg_key><arg_value>{written}</arg_value></tool_call>"
    assert _accepts(spec, text, SPECIAL.special_ids)
    whole = parse_output(text, "glm47", tools={"f": parameters})
    assert json.loads(whole.tool_calls[0].arguments) == {"v": value}
