"""GLM tool calls cut by max_tokens inside a key/value pair: the pair as far as generated, as
the JSON it started (vLLM streams arguments as parsed), in the whole parse and the stream."""

from __future__ import annotations

import pytest

from ember.models.api.deltas import ParsedOutput, ToolCall
from ember.models.api.output_parser import parse_output
from tests.models.api.test_output_parser import TOOLS, _check_stream, ids

CASES = [
    (
        "glm47_call_cut_inside_a_string_value_keeps_it",
        "glm47",
        "off",
        '<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par"is',
        ParsedOutput(None, None, (ToolCall("call_0", "get_weather", '{"city":"Par\\"is'),)),
    ),
    (
        "glm47_call_cut_inside_a_number_keeps_its_digits",
        "glm47",
        "off",
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>P</arg_value><arg_key>days</arg_key><arg_value>1",
        ParsedOutput(None, None, (ToolCall("call_0", "get_weather", '{"city":"P","days":1'),)),
    ),
    (
        "glm47_call_cut_inside_a_key_keeps_it",
        "glm47",
        "off",
        "<tool_call>get_weather<arg_key>ci",
        ParsedOutput(None, None, (ToolCall("call_0", "get_weather", '{"ci'),)),
    ),
    (
        "glm45_call_cut_after_a_value_marker_opens_its_string",
        "glm45",
        "off",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>",
        ParsedOutput(None, None, (ToolCall("call_0", "get_weather", '{"city":"'),)),
    ),
]


@pytest.mark.parametrize(("name", "fmt", "reasoning", "text", "expected"), CASES)
def test_a_pair_cut_short_is_kept_as_far_as_generated(
    name: str, fmt: str, reasoning: str, text: str, expected: ParsedOutput
) -> None:
    whole = parse_output(text, fmt, tools=TOOLS, reasoning=reasoning, id_factory=ids())  # type: ignore[arg-type]
    assert whole == expected
    _check_stream(fmt, reasoning, text, expected)
