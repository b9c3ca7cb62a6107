"""The automaton budget is the request's, not each schema's: 40 tools each just under a
per-tool budget were 16 CPU-s of parsing one 37 KB request, on the model server's event loop.
Every schema a request carries (its tools' parameters, ``response_format``) draws on one budget,
when the request is parsed, when GLM's values are checked, and when the grammar is built."""

from __future__ import annotations

import re

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automata import MAX_AUTOMATON_WORK, AutomatonBudgetExceeded
from ember.models.constrain.schema_check import check_schema
from ember.models.constrain.session import ConstraintSpec, build_root
from ember.models.constrain.tool_grammars import ToolSignature


def _parameters(tool: int, count: int = 40) -> dict:
    # About 2,000 states and 5,100 units of work a pattern: 40 of them are about a third of
    # the 600,000-unit budget, so any one tool compiles and three together do not.
    properties = {
        f"p{i}": {"type": "string", "pattern": f"^[0-9a-f]{{1000}}-{tool}-{i}$"}
        for i in range(count)
    }
    return {"type": "object", "properties": properties, "required": list(properties)}


def _request(tools: int, **more: object) -> dict:
    return {
        "messages": [{"role": "user", "content": "x"}],
        "tool_choice": "required",
        "tools": [
            {
                "type": "function",
                "function": {"name": f"f{t}", "strict": True, "parameters": _parameters(t)},
            }
            for t in range(tools)
        ],
        **more,
    }


def test_one_tool_under_the_budget_is_taken() -> None:
    parse_chat_request(_request(1))


def test_tools_that_together_pass_the_budget_are_a_400_naming_the_keyword() -> None:
    with pytest.raises(AutomatonBudgetExceeded) as caught:
        parse_chat_request(_request(3))
    assert caught.value.field.startswith("/tools/2/function/parameters/properties/p")
    # The request's limit and count, not what was left of it when the third tool began
    # (review35: "at most 38,760 ... states in all, per request").
    assert f"at most {MAX_AUTOMATON_WORK:,} units of automaton work" in str(caught.value)
    assert "in all, per request" in str(caught.value)
    numbers = re.findall(r"\d[\d,]*", str(caught.value).rsplit("got ", 1)[1])
    so_far, left = (int(n.replace(",", "")) for n in numbers[:2])
    assert so_far > MAX_AUTOMATON_WORK / 3 and left < MAX_AUTOMATON_WORK / 3
    assert caught.value.field.endswith("/pattern")
    assert "per request" in str(caught.value)


def test_known_schemas_are_charged_as_if_compiled() -> None:
    # Each tool's schema compiled (and remembered) on its own first: the request still is
    # refused, where it runs out, though nothing of it is compiled again.
    for t in range(3):
        check_schema(_parameters(t), path="/p", strict=True)
    with pytest.raises(AutomatonBudgetExceeded) as caught:
        parse_chat_request(_request(3))
    assert caught.value.field.startswith("/tools/2/function/parameters")
    assert "per request" in str(caught.value)


def test_the_response_format_draws_on_the_same_budget() -> None:
    schema = {"name": "s", "schema": _parameters(9), "strict": True}
    body = _request(2, response_format={"type": "json_schema", "json_schema": schema})
    body["tool_choice"] = "auto"
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(body)
    assert caught.value.field.startswith("/response_format/json_schema/schema/properties/p")


@pytest.mark.parametrize("tool_format", ["kimi", "glm47"])
def test_the_grammar_build_shares_one_budget(tool_format: str) -> None:
    spec = ConstraintSpec(
        tools=tuple(ToolSignature(f"f{t}", _parameters(t), strict=True) for t in range(3)),
        tools_required=True,
        tool_format=tool_format,  # type: ignore[arg-type]
    )
    with pytest.raises(AutomatonBudgetExceeded) as caught:
        build_root(spec, {})
    assert caught.value.field.startswith("/tools/2/function/parameters/properties/p")


def test_one_schema_in_three_tools_is_charged_once() -> None:
    # Three tools with the same parameters build the same automata (one grammar shares them):
    # charged three times, the request was refused as if it built three tools' work.
    request = _request(3)
    for tool in request["tools"]:
        tool["function"]["parameters"] = _parameters(7)
    parsed = parse_chat_request(request)
    assert 0 < parsed.automata.states < MAX_AUTOMATON_WORK / 2
