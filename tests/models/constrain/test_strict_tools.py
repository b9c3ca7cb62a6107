"""``function.strict: true`` means what OpenAI means by it: the tool's schema is compiled
strictly (a keyword ember cannot enforce is a 400 naming it, where a tool's schema is otherwise a
hint and such keywords are dropped), and with ``tool_choice: auto`` a call the model makes has
arguments its schema allows (content, or content then calls), where there used to be no grammar
at all in auto mode (review26 H1)."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.constraints import constraint_for
from ember.models.api.errors import InvalidRequestField
from ember.models.api.output_parser import parse_output
from ember.models.constrain.session import ConstraintSpec, GrammarCache
from ember.models.constrain.tool_grammars import ToolSignature
from tests.models.constrain.fixtures import detokenize, sample_tokens, small_vocab
from tests.models.constrain.test_tool_grammars import _accepts

FORMATS = ("kimi", "glm45", "glm47")
SPECIAL = small_vocab()
PLAIN = small_vocab(special_markers=False)
PAY = {
    "type": "object",
    "properties": {
        "iban": {"type": "string", "pattern": "^DE[0-9]{4}$"},
        "amount": {"type": "integer", "minimum": 1, "maximum": 99},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2},
    },
    "required": ["iban", "amount", "tags"],
    "additionalProperties": False,
}


def _body(parameters: dict, *, strict: bool, choice: object = "auto") -> dict:
    function = {"name": "pay", "strict": strict, "parameters": parameters}
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": function}],
        "tool_choice": choice,
    }


@pytest.mark.parametrize(
    ("keyword", "schema"),
    [
        ("pattern", {"type": "string", "pattern": "^(?=DE)[A-Z0-9]{22}$"}),
        ("multipleOf", {"type": "number", "multipleOf": 0.01}),
        ("uniqueItems", {"type": "array", "uniqueItems": True}),
    ],
)
def test_a_strict_tool_refuses_what_it_cannot_enforce_naming_the_keyword(
    keyword: str, schema: dict
) -> None:
    parameters = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    parse_chat_request(_body(parameters, strict=False))  # a hint: the keyword is dropped
    with pytest.raises(InvalidRequestField) as refused:
        parse_chat_request(_body(parameters, strict=True))
    assert refused.value.field == f"/tools/0/function/parameters/properties/x/{keyword}"
    if keyword != "pattern":
        # OpenAI's strict mode takes multipleOf: refusing it is ember's choice, said as such
        # (review30 #5), with the way out.
        assert "ember refuses" in str(refused.value)
        assert "set strict to false" in str(refused.value)


@pytest.mark.parametrize("tool_format", FORMATS)
def test_auto_with_a_strict_tool_is_constrained_and_without_one_is_free(tool_format: str) -> None:
    strict = parse_chat_request(_body(PAY, strict=True))
    spec = constraint_for(strict, tool_format=tool_format, reasoning="off")  # type: ignore[arg-type]
    assert spec is not None and spec.text and not spec.tools_required
    assert spec.tools[0].strict
    loose = parse_chat_request(_body(PAY, strict=False))
    assert constraint_for(loose, tool_format=tool_format, reasoning="off") is None  # type: ignore[arg-type]


KIMI_PAY = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.pay:0<|tool_call_argument_begin|>"
    '{"iban": "DE1234", "amount": AMOUNT, "tags": ["a"]}<|tool_call_end|><|tool_calls_section_end|>'
)
GLM_PAY = (
    "<tool_call>pay<arg_key>iban</arg_key><arg_value>DE1234</arg_value><arg_key>amount</arg_key>"
    '<arg_value>AMOUNT</arg_value><arg_key>tags</arg_key><arg_value>["a"]</arg_value></tool_call>'
)


@pytest.mark.parametrize("special", [True, False])
@pytest.mark.parametrize(("tool_format", "call"), [("kimi", KIMI_PAY), ("glm47", GLM_PAY)])
def test_content_calls_or_both_and_never_a_call_the_schema_refuses(
    tool_format: str, call: str, special: bool
) -> None:
    ids = SPECIAL.special_ids if special else {}
    spec = ConstraintSpec(
        tools=(ToolSignature("pay", PAY, strict=True),), text=True, tool_format=tool_format
    )  # type: ignore[arg-type]
    good, bad = call.replace("AMOUNT", "12"), call.replace("AMOUNT", "120")
    assert _accepts(spec, "It is sunny.", ids)
    assert _accepts(spec, "", ids)
    assert _accepts(spec, good, ids)
    assert _accepts(spec, "Paying now. " + good, ids)
    assert not _accepts(spec, bad, ids)  # amount above maximum
    assert not _accepts(spec, "Paying now. " + bad, ids)
    assert not _accepts(spec, good.replace("pay", "steal", 1), ids)  # undeclared tool
    assert not _accepts(spec, good + " and more text", ids)


@pytest.mark.parametrize("tool_format", FORMATS)
@pytest.mark.parametrize("seed", range(6))
def test_random_auto_outputs_parse_back_with_valid_arguments(tool_format: str, seed: int) -> None:
    tools = (
        ToolSignature("pay", PAY, strict=True),
        ToolSignature("search", {"type": "object", "properties": {"q": {"type": "string"}}}),
    )
    rng = random.Random(seed)
    calls = 0
    for vocab in (SPECIAL, PLAIN):
        spec = ConstraintSpec(tools=tools, text=True, tool_format=tool_format)  # type: ignore[arg-type]
        for _ in range(4):
            decoder = GrammarCache().decoder(spec, vocab)
            text = detokenize(vocab, sample_tokens(decoder, rng, closing=0.6))
            parsed = parse_output(text, tool_format, tools={t.name: t.parameters for t in tools})  # type: ignore[arg-type]
            for call in parsed.tool_calls:
                calls += 1
                schema = next(t.parameters for t in tools if t.name == call.name)
                jsonschema.Draft202012Validator(schema).validate(json.loads(call.arguments))
    assert calls  # the walks took the call branch at least once
