"""Tool-call grammars for Kimi and GLM: random generation under tool_choice required/named
always yields calls the output parser reads back, with arguments that match the schema."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from ember.models.api.output_parser import parse_output
from ember.models.constrain.answer_grammar import with_reasoning
from ember.models.constrain.grammar import END, advance, initial_state
from ember.models.constrain.nodes import Marker
from ember.models.constrain.session import ConstraintSpec, GrammarCache, build_root
from ember.models.constrain.tool_grammars import ToolSignature
from tests.models.constrain.fixtures import (
    detokenize,
    random_schema,
    sample_tokens,
    small_vocab,
    standard_schema,
)

WEATHER = ToolSignature(
    "get_weather",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "detail": {"type": ["boolean", "string"]},
        },
        "required": ["city"],
    },
)
SEARCH = ToolSignature("search", {"type": "object", "properties": {"q": {"type": "string"}}})
NO_ARGS = ToolSignature("now", None)
FORMATS = ("kimi", "glm45", "glm47")
SPECIAL = small_vocab()
PLAIN = small_vocab(special_markers=False)  # markers spelled as bytes


def _accepts(spec: ConstraintSpec, text: str, special_ids: dict[str, int]) -> bool:
    """Feed text, spelling a marker as its special symbol when the vocabulary has one."""
    state = initial_state(build_root(spec, special_ids))
    i = 0
    while i < len(text):
        marker = next((m for m in special_ids if text.startswith(m, i)), None)
        if marker is not None:
            state = advance(state, 256 + special_ids[marker])
            i += len(marker)
            continue
        for byte in text[i].encode():
            state = advance(state, byte)
        i += 1
        if not state:
            return False
    return () in advance(state, END)


KIMI_CALL = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Paris", "days": 3}<|tool_call_end|>'
    "<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
    "<|tool_calls_section_end|>"
)
GLM47_CALL = (
    '<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris, "FR"</arg_value>'
    "<arg_key>days</arg_key><arg_value>3</arg_value><arg_key>detail</arg_key>"
    "<arg_value>true</arg_value></tool_call>"
)
GLM45_CALL = (
    "\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
    "<arg_key>unit</arg_key>\n<arg_value>c</arg_value>\n</tool_call>"
)


@pytest.mark.parametrize("special", [True, False])
@pytest.mark.parametrize(
    ("tool_format", "text", "expected"),
    [
        ("kimi", KIMI_CALL, True),
        ("kimi", KIMI_CALL.replace("search:1", "search:0"), False),  # indices count up
        ("kimi", KIMI_CALL.replace('"days": 3', '"days": "3"'), False),  # schema type
        ("kimi", KIMI_CALL.replace("get_weather:0", "get_time:0"), False),  # undeclared tool
        ("glm47", GLM47_CALL, True),
        ("glm47", GLM47_CALL.replace("<arg_value>3<", "<arg_value>three<"), False),
        (
            "glm47",
            GLM47_CALL.replace('<arg_key>city</arg_key><arg_value>Paris, "FR"</arg_value>', ""),
            False,
        ),
        ("glm45", GLM45_CALL, True),
        ("glm45", GLM45_CALL.replace("<arg_value>c<", "<arg_value>k<"), False),  # enum
        ("glm47", GLM45_CALL, False),  # the 4.7 dialect has no newlines
        # Free text and JSON strings inside a call never spell a marker.
        ("kimi", KIMI_CALL.replace('"Paris"', '"<|tool_call_end|>"'), False),
        ("kimi", KIMI_CALL.replace('"Paris"', '"<|tool_call_end|"'), True),
        ("glm47", GLM47_CALL.replace("Paris", "a</tool_call>b"), False),
        ("glm47", GLM47_CALL.replace("Paris", "a</tool_callb"), True),
    ],
)
def test_tool_call_grammar_accepts_exactly(
    tool_format: str, text: str, expected: bool, special: bool
) -> None:
    vocab = SPECIAL if special else PLAIN
    spec = ConstraintSpec(tools=(WEATHER, SEARCH), tools_required=True, tool_format=tool_format)  # type: ignore[arg-type]
    assert _accepts(spec, text, vocab.special_ids if special else {}) is expected


def test_named_function_allows_one_call_only() -> None:
    spec = ConstraintSpec(
        tools=(WEATHER,), tools_required=True, tool_format="kimi", parallel_tool_calls=False
    )
    one = KIMI_CALL.split("<|tool_call_begin|>functions.search")[0] + "<|tool_calls_section_end|>"
    assert _accepts(spec, one, SPECIAL.special_ids)
    assert not _accepts(spec, KIMI_CALL, SPECIAL.special_ids)


def _check_calls(
    text: str, tool_format: str, tools: tuple[ToolSignature, ...], parallel: bool
) -> None:
    parsed = parse_output(text, tool_format, tools={t.name: t.parameters for t in tools})  # type: ignore[arg-type]
    assert parsed.content is None and parsed.tool_calls
    assert len(parsed.tool_calls) == 1 or parallel
    by_name = {t.name: t for t in tools}
    for call in parsed.tool_calls:
        arguments = json.loads(call.arguments)
        schema = by_name[call.name].parameters or {
            "type": "object",
            "properties": {},
            "additionalProperties": False,
        }
        jsonschema.Draft202012Validator(standard_schema(schema)).validate(arguments)


@pytest.mark.parametrize("tool_format", FORMATS)
@pytest.mark.parametrize("seed", range(10))
def test_random_tool_calls_parse_back_and_validate(tool_format: str, seed: int) -> None:
    rng = random.Random(seed)
    tools = (WEATHER, SEARCH, NO_ARGS) + tuple(
        ToolSignature(f"tool_{i}", random_schema(random.Random(seed * 10 + i))) for i in range(2)
    )
    tools = tuple(t for t in tools if t.parameters is None or t.parameters.get("type") == "object")
    parallel = seed % 2 == 0
    for vocab in (SPECIAL, PLAIN):
        spec = ConstraintSpec(
            tools=tools, tools_required=True, tool_format=tool_format, parallel_tool_calls=parallel
        )  # type: ignore[arg-type]
        decoder = GrammarCache().decoder(spec, vocab)
        text = detokenize(vocab, sample_tokens(decoder, rng))
        _check_calls(text, tool_format, tools, parallel)


@pytest.mark.parametrize("tool_format", FORMATS)
def test_reasoning_then_tool_call(tool_format: str) -> None:
    spec = ConstraintSpec(
        tools=(WEATHER,), tools_required=True, tool_format=tool_format, reasoning="inside"
    )  # type: ignore[arg-type]
    decoder = GrammarCache().decoder(spec, SPECIAL)
    text = detokenize(SPECIAL, sample_tokens(decoder, random.Random(5)))
    assert "</think>" in text
    parsed = parse_output(
        text, tool_format, tools={"get_weather": WEATHER.parameters}, reasoning="inside"
    )  # type: ignore[arg-type]
    assert parsed.tool_calls and parsed.tool_calls[0].name == "get_weather"
    assert parsed.reasoning == text.split("</think>")[0].strip() or parsed.reasoning is None


def test_json_or_tool_calls_when_tools_are_optional() -> None:
    spec = ConstraintSpec(
        json="schema",
        schema={"type": "object", "properties": {"a": {"type": "integer"}}},
        tools=(SEARCH,),
        tool_format="glm47",
    )
    assert _accepts(spec, '{"a":1}', SPECIAL.special_ids)
    assert _accepts(
        spec,
        "<tool_call>search<arg_key>q</arg_key><arg_value>x</arg_value></tool_call>",
        SPECIAL.special_ids,
    )
    assert not _accepts(spec, "hello", SPECIAL.special_ids)


def test_think_marker_spelled_in_bytes_is_refused_when_a_special_token_exists() -> None:
    marker = Marker(SPECIAL.special_ids)
    body = build_root(ConstraintSpec(json="object"), SPECIAL.special_ids)
    state = initial_state(with_reasoning(body, marker, "inside"))
    for byte in b"hmm </think>":
        state = advance(state, byte)
    assert not state  # the spelled-out closing tag would fool a text parser


@pytest.mark.parametrize(("days", "ok"), [("3", True), ("14", True), ("0", False), ("15", False)])
def test_bounded_tool_arguments_hold_in_glm_raw_values_and_kimi_json(days: str, ok: bool) -> None:
    """Tool parameters are lenient, but bounds ember can enforce are enforced there too."""
    bounded = ToolSignature(
        "forecast",
        {
            "type": "object",
            "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 14}},
        },
    )
    glm = f"<tool_call>forecast<arg_key>days</arg_key><arg_value>{days}</arg_value></tool_call>"
    spec = ConstraintSpec(tools=(bounded,), tools_required=True, tool_format="glm47")
    assert _accepts(spec, glm, SPECIAL.special_ids) is ok
    kimi = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.forecast:0"
        f'<|tool_call_argument_begin|>{{"days": {days}}}<|tool_call_end|><|tool_calls_section_end|>'
    )
    spec = ConstraintSpec(tools=(bounded,), tools_required=True, tool_format="kimi")
    assert _accepts(spec, kimi, SPECIAL.special_ids) is ok
