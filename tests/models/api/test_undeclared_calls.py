# ruff: noqa: E501  (model outputs read best unwrapped)
"""A tool call to a function the request never declared is dropped, text and all, streamed or
not (SGLang's "undefined function" rule): a tool loop that looks names up must never see it;
each drop is reported to ``on_undeclared`` (the server logs it)."""

from __future__ import annotations

import pytest

from ember.models.api.deltas import ParsedOutput, ToolCall
from ember.models.api.output_parser import ChatOutputParser
from tests.models.api.test_output_parser import AB, CB, CE, SB, SE, TOOLS, _check_stream, ids

CASES = [
    (
        "glm_undeclared_function_dropped",
        "glm47",
        "off",
        "Let me see.<tool_call>list_functions\n</tool_call><tool_call>search<arg_key>q</arg_key><arg_value>x</arg_value></tool_call>",
        ParsedOutput("Let me see.", None, (ToolCall("call_0", "search", '{"q":"x"}'),)),
    ),
    (
        "glm_only_undeclared_call_leaves_no_call",
        "glm47",
        "off",
        "<tool_call>list_functions<arg_key>all</arg_key><arg_value>true</arg_value></tool_call>",
        ParsedOutput("", None, ()),
    ),
    (
        "glm_undeclared_call_cut_by_max_tokens",
        "glm47",
        "off",
        "ok<tool_call>list_functions\n<arg_key>a",
        ParsedOutput("ok", None, ()),
    ),
    (
        "kimi_undeclared_function_dropped",
        "kimi",
        "off",
        f'x{SB}{CB}functions.list_functions:0{AB}{{}}{CE}{CB}functions.search:1{AB}{{"q": "w"}}{CE}{SE}',
        ParsedOutput("x", None, (ToolCall("functions.search:1", "search", '{"q": "w"}'),)),
    ),
    (
        "kimi_only_undeclared_call_leaves_no_call",
        "kimi",
        "off",
        f"{SB}{CB}list_functions:0{AB}{{}}{CE}{SE}",
        ParsedOutput("", None, ()),
    ),
]


@pytest.mark.parametrize(
    ("name", "fmt", "reasoning", "text", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_undeclared_calls_are_dropped(
    name: str, fmt: str, reasoning: str, text: str, expected: ParsedOutput
) -> None:
    _check_stream(fmt, reasoning, text, expected)  # streamed in random pieces, and whole


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("glm47", "<tool_call>list_functions\n</tool_call>"),
        ("kimi", f"{SB}{CB}functions.list_functions:0{AB}{{}}{CE}{SE}"),
    ],
)
def test_each_drop_is_reported(fmt: str, text: str) -> None:
    dropped: list[str] = []
    parser = ChatOutputParser(fmt, tools=TOOLS, id_factory=ids(), on_undeclared=dropped.append)  # type: ignore[arg-type]
    parser.feed(text)
    parser.finish()
    assert dropped == ["list_functions"]
