"""A request's tools are bounded before any schema is compiled (review26: 500 tools x 400
properties took 2.5 s to check on the event loop and 16.3 s to build): at most 128 tools, as
OpenAI, and 5,000 properties across their parameters, each past-the-bound a 400 naming it."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.errors import InvalidRequestField
from ember.models.api.tool_limits import MAX_TOOL_PROPERTIES, MAX_TOOLS, count_properties


def _tool(name: str, properties: int, *, flat: bool = False) -> dict:
    parameters = {
        "type": "object",
        "properties": {f"p{j}": {"type": "string"} for j in range(properties)},
    }
    if flat:  # Workers AI's older shape
        return {"name": name, "parameters": parameters}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def _chat(tools: list) -> dict:
    return {"messages": [{"role": "user", "content": "hi"}], "tools": tools}


def _refused(tools: list) -> InvalidRequestField:
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(_chat(tools))
    return caught.value


def test_more_than_128_tools_are_refused_naming_tools() -> None:
    error = _refused([_tool(f"t{i}", 1) for i in range(MAX_TOOLS + 1)])
    assert error.field == "/tools"
    assert f"at most {MAX_TOOLS} tools" in str(error) and "129 tools" in str(error)
    assert len(parse_chat_request(_chat([_tool(f"t{i}", 1) for i in range(MAX_TOOLS)])).tools)


@pytest.mark.parametrize("flat", [False, True])
def test_properties_across_tools_are_bounded_naming_the_tool_that_crosses(flat: bool) -> None:
    half = MAX_TOOL_PROPERTIES // 2
    error = _refused([_tool("a", half, flat=flat), _tool("b", half + 1, flat=flat)])
    expected = "/tools/1/parameters" if flat else "/tools/1/function/parameters"
    assert error.field == expected
    assert f"at most {MAX_TOOL_PROPERTIES} properties in all" in str(error)
    parse_chat_request(_chat([_tool("a", half, flat=flat), _tool("b", half, flat=flat)]))


def test_properties_are_counted_wherever_a_schema_declares_them() -> None:
    inner = {"type": "object", "properties": {"x": {}, "y": {}}}
    schema = {
        "type": "object",
        "properties": {"a": inner, "properties": {"type": "string"}},
        "items": inner,
        "anyOf": [inner, {"$ref": "#/$defs/d"}],
        "$defs": {"d": inner},
        "enum": [{"properties": {"not": "a schema"}}],
    }
    # 2 at the top, 2 under a, 2 under items, 2 in anyOf, 2 in $defs; enum values are not schemas.
    assert count_properties(schema) == 10
