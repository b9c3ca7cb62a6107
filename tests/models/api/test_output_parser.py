# ruff: noqa: E501  (tables of exact request bodies, outputs and messages read best unwrapped)
"""Model output -> reasoning_content, content, tool_calls, for Kimi and GLM; streamed deltas
always add up to the one-shot result and never show a piece of a marker."""

from __future__ import annotations

import itertools
import random

import pytest

from ember.models.api.deltas import (
    DeltaMessage,
    OutputAccumulator,
    ParsedOutput,
    ToolCall,
    ToolCallDelta,
)
from ember.models.api.output_parser import ChatOutputParser, parse_output, reasoning_prefix

TOOLS = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "zip": {"type": "string"},
            "metric": {"type": "boolean"},
            "filters": {"type": "object"},
            "note": {"type": ["string", "null"]},
        },
    },
    "search": {"type": "object", "properties": {"q": {"type": "string"}}},
}
SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CB, AB, CE = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def ids() -> object:
    counter = itertools.count()
    return lambda: f"call_{next(counter)}"


CASES = [
    # (name, format, reasoning, text, expected)
    (
        "kimi_single",
        "kimi",
        "off",
        f'I\'ll check. {SB}{CB}functions.get_weather:0{AB}{{"city": "Beijing"}}{CE}{SE}',
        ParsedOutput(
            "I'll check.",
            None,
            (ToolCall("functions.get_weather:0", "get_weather", '{"city": "Beijing"}'),),
        ),
    ),
    (
        "kimi_parallel_padded",
        "kimi",
        "off",
        f'{SB}\n{CB} functions.get_weather:0 {AB} {{"city": "A"}} {CE}\n{CB}functions.search:1{AB}{{}}{CE}{SE}',
        ParsedOutput(
            None,
            None,
            (
                ToolCall("functions.get_weather:0", "get_weather", '{"city": "A"}'),
                ToolCall("functions.search:1", "search", "{}"),
            ),
        ),
    ),
    (
        "kimi_no_prefix_and_bad_id",
        "kimi",
        "off",
        f'x{SB}{CB}search:0{AB}{{"q": 1}}{CE}{CB}functions.bad.0{AB}{{}}{CE}{SE} after',
        ParsedOutput("x after", None, (ToolCall("search:0", "search", '{"q": 1}'),)),
    ),
    (
        "kimi_invalid_json_kept",
        "kimi",
        "off",
        f'{SB}{CB}functions.get_weather:0{AB}{{"city": "Beijing"{CE}{SE}',
        ParsedOutput(
            None, None, (ToolCall("functions.get_weather:0", "get_weather", '{"city": "Beijing"'),)
        ),
    ),
    (
        "kimi_reasoning_ends_at_tool_section",
        "kimi",
        "optional",
        f'<think> need weather {SB}{CB}functions.search:0{AB}{{"q": "w"}}{CE}{SE}',
        ParsedOutput(
            None, "need weather", (ToolCall("functions.search:0", "search", '{"q": "w"}'),)
        ),
    ),
    (
        "kimi_truncated_arguments",
        "kimi",
        "off",
        f'{SB}{CB}functions.search:0{AB}{{"q": "we',
        ParsedOutput(None, None, (ToolCall("functions.search:0", "search", '{"q": "we'),)),
    ),
    (
        "glm45_typed_values",
        "glm45",
        "optional",
        "<think>\nLet me look.\n</think>\n\nSure.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>zip</arg_key>\n<arg_value>02139</arg_value>\n"
        '<arg_key>metric</arg_key>\n<arg_value>true</arg_value>\n<arg_key>filters</arg_key>\n<arg_value>{"rain": [1, 2]}</arg_value>\n'
        "<arg_key>note</arg_key>\n<arg_value>null</arg_value>\n</tool_call>",
        ParsedOutput(
            "Sure.",
            "Let me look.",
            (
                ToolCall(
                    "call_0",
                    "get_weather",
                    '{"city":"北京","days":3,"zip":"02139","metric":true,"filters":{"rain":[1,2]},"note":null}',
                ),
            ),
        ),
    ),
    (
        "glm47_inside_reasoning_two_calls",
        "glm47",
        "inside",
        "The user wants weather.</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
        "<tool_call>search<arg_key>q</arg_key><arg_value>42</arg_value></tool_call>",
        ParsedOutput(
            None,
            "The user wants weather.",
            (
                ToolCall("call_0", "get_weather", '{"city":"Paris"}'),
                ToolCall("call_1", "search", '{"q":"42"}'),
            ),
        ),
    ),
    (
        "glm47_no_arguments_and_unknown_key",
        "glm47",
        "off",
        "<tool_call>search</tool_call><tool_call>get_weather<arg_key>extra</arg_key><arg_value>[1]</arg_value></tool_call>",
        ParsedOutput(
            None,
            None,
            (
                ToolCall("call_0", "search", "{}"),
                ToolCall("call_1", "get_weather", '{"extra":[1]}'),
            ),
        ),
    ),
    (
        # Cut by max_tokens inside a call: its arguments as far as they got, unclosed, as
        # OpenAI's are with finish_reason length (and Kimi's here); never closed into a call
        # the model did not finish.
        "glm47_truncated_call_stays_as_far_as_it_got",
        "glm47",
        "off",
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_val",
        ParsedOutput(None, None, (ToolCall("call_0", "get_weather", '{"city":"Paris","days":'),)),
    ),
    (
        "glm47_call_cut_before_its_arguments_has_none",
        "glm47",
        "off",
        "<tool_call>get_weather\n",
        ParsedOutput(None, None, (ToolCall("call_0", "get_weather", ""),)),
    ),
    (
        "glm47_call_cut_inside_its_name_is_no_call",
        "glm47",
        "off",
        "<tool_call>get_",
        ParsedOutput("", None, ()),  # nothing at all came of the output
    ),
    (
        "glm_value_may_hold_other_markup",
        "glm47",
        "off",
        "<tool_call>search<arg_key>q</arg_key><arg_value><b>bold</b> & </arg_key></arg_value></tool_call>",
        ParsedOutput(
            None, None, (ToolCall("call_0", "search", '{"q":"<b>bold</b> & </arg_key>"}'),)
        ),
    ),
    (
        "plain_text_with_angle_brackets",
        "glm47",
        "optional",
        "a < b and <tool is not a call",
        ParsedOutput("a < b and <tool is not a call", None, ()),
    ),
    (
        "reasoning_never_closed",
        "glm47",
        "inside",
        "still thinking",
        ParsedOutput(None, "still thinking", ()),
    ),
    (
        "thinking_off_keeps_tags_as_content",
        "kimi",
        "off",
        "<think>x</think>y",
        ParsedOutput("<think>x</think>y", None, ()),
    ),
]


@pytest.mark.parametrize(
    ("name", "fmt", "reasoning", "text", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_parse_output(
    name: str, fmt: str, reasoning: str, text: str, expected: ParsedOutput
) -> None:
    assert parse_output(text, fmt, tools=TOOLS, reasoning=reasoning, id_factory=ids()) == expected  # type: ignore[arg-type]


def _check_stream(
    fmt: str,
    reasoning: str,
    text: str,
    expected: ParsedOutput,
    tools: dict | None = TOOLS,
    drop: tuple[str, ...] = (),
) -> None:
    """At every point, what was sent of content and reasoning is a prefix of the final field
    (so no piece of a marker ever went out), and at the end the stream equals the message."""
    for seed in range(60):
        rng = random.Random(seed)
        parser = ChatOutputParser(
            fmt, tools=tools, reasoning=reasoning, id_factory=ids(), drop=drop
        )  # type: ignore[arg-type]
        total = OutputAccumulator()
        i = 0
        while i < len(text):
            size = rng.choice([1, 1, 2, 3, 7, 20])
            total.add(parser.feed(text[i : i + size]))
            i += size
            assert (expected.content or "").startswith("".join(total.content))
            assert (expected.reasoning or "").startswith("".join(total.reasoning))
        total.add(parser.finish())
        assert total.result() == expected


@pytest.mark.parametrize(
    ("name", "fmt", "reasoning", "text", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_streamed_deltas_add_up_and_hide_markers(
    name: str, fmt: str, reasoning: str, text: str, expected: ParsedOutput
) -> None:
    _check_stream(fmt, reasoning, text, expected)


KIMI_DROP = (SB, SE, CB, AB, CE, "<think>", "</think>")
GLM_DROP = ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")
# Special tokens the server kept in the text for the parser (skip_special_tokens): consumed
# where they mean something, dropped wherever else they land.
DROP_CASES = [
    # (name, format, reasoning, tools, drop, text, expected)
    (
        "stray_markers_leave_content",
        "kimi",
        "off",
        None,
        KIMI_DROP,
        f"{SB}{CB}functions{CE} hello</think> world{SE}",
        ParsedOutput("functions hello world", None, ()),
    ),
    (
        "stray_markers_leave_reasoning",
        "kimi",
        "inside",
        None,
        KIMI_DROP,
        f"<think>plan{CE} more</think> answer{SE}",
        ParsedOutput("answer", "plan more", ()),
    ),
    (
        "consumed_markers_still_work",
        "kimi",
        "optional",
        TOOLS,
        KIMI_DROP,
        f'<think>x</think>y </think>{CE}z{SB}{CB}functions.search:0{AB}{{"q": "w"}}{CE}{SE}',
        ParsedOutput("y z", "x", (ToolCall("functions.search:0", "search", '{"q": "w"}'),)),
    ),
    (
        "glm_stray_closers",
        "glm47",
        "inside",
        TOOLS,
        (*GLM_DROP, "<think>", "</think>"),
        "r</arg_value>s</think>t</tool_call>u<tool_call>search<arg_key>q</arg_key><arg_value>1</arg_value></tool_call>",
        ParsedOutput("tu", "rs", (ToolCall("call_0", "search", '{"q":"1"}'),)),
    ),
    (
        "nothing_dropped_when_asked_to_keep",
        "kimi",
        "off",
        None,
        (),
        f"{SB}{CB}functions",
        ParsedOutput(f"{SB}{CB}functions", None, ()),
    ),
]


@pytest.mark.parametrize(
    ("name", "fmt", "reasoning", "tools", "drop", "text", "expected"),
    DROP_CASES,
    ids=[c[0] for c in DROP_CASES],
)
def test_special_markers_out_of_place_are_dropped(
    name: str,
    fmt: str,
    reasoning: str,
    tools: dict | None,
    drop: tuple[str, ...],
    text: str,
    expected: ParsedOutput,
) -> None:
    whole = parse_output(text, fmt, tools=tools, reasoning=reasoning, id_factory=ids(), drop=drop)  # type: ignore[arg-type]
    assert whole == expected
    _check_stream(fmt, reasoning, text, expected, tools, drop)


def test_tool_calls_without_tools_stay_content() -> None:
    text = "<tool_call>search<arg_key>q</arg_key><arg_value>x</arg_value></tool_call>"
    assert parse_output(text, "glm47") == ParsedOutput(text, None, ())


def test_stream_shape_of_a_kimi_call() -> None:
    parser = ChatOutputParser("kimi", tools=TOOLS)
    pieces = ["Hi", " there ", SB, CB, "functions.search:0", AB, '{"q"', ': "x"}', CE, SE]
    deltas = [parser.feed(p) for p in pieces] + [parser.finish()]
    assert [d.to_dict() for d in deltas] == [
        {"content": "Hi"},
        {"content": " there"},
        {},
        {},
        {},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "functions.search:0",
                    "type": "function",
                    "function": {"name": "search", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"q"'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ': "x"}'}}]},
        {},
        {},
        {},
    ]


def test_delta_merging() -> None:
    delta = DeltaMessage()
    delta.add_tool_piece(ToolCallDelta(0, "id", "f", ""))
    delta.add_tool_piece(ToolCallDelta(0, arguments='{"a"'))
    delta.add_tool_piece(ToolCallDelta(0, arguments=":1}"))
    assert delta.tool_calls == [ToolCallDelta(0, "id", "f", '{"a":1}')]


@pytest.mark.parametrize(
    ("prompt", "enabled", "expected"),
    [
        ("<|assistant|><think>", True, "inside"),
        ("<|assistant|>", True, "optional"),
        ("<|assistant|><think>", False, "off"),
    ],
)
def test_reasoning_prefix_from_the_rendered_prompt(
    prompt: str, enabled: bool, expected: str
) -> None:
    assert reasoning_prefix(prompt, enable_thinking=enabled) == expected
