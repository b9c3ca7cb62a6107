"""The regex constraint under SGLang's and vLLM's names, on the chat, completion and generate
requests: parsed into the request, turned into the grammar spec, refused with the field named
when it cannot be enforced or collides with another grammar."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.completion_request import (
    parse_completion_request,
    parse_generate_request,
)
from ember.models.api.constraints import constraint_for
from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.session import ConstraintSpec
from tests.models.api.chat_bodies import WEATHER
from tests.models.api.chat_bodies import with_fields as chat


@pytest.mark.parametrize(
    "fields",
    [
        {"regex": r"\d{3}"},
        {"structured_outputs": {"regex": r"\d{3}"}},
        {"guided_regex": r"\d{3}"},
        {"regex": r"\d{3}", "tools": [WEATHER], "tool_choice": "auto"},
    ],
)
def test_chat_regex_becomes_the_grammar(fields: dict) -> None:
    request = parse_chat_request(chat(**fields))
    assert request.regex == r"\d{3}"
    spec = constraint_for(request, tool_format="glm47", reasoning="inside")
    assert spec == ConstraintSpec(regex=r"\d{3}", reasoning="inside")


def test_completion_and_generate_take_the_regex() -> None:
    assert parse_completion_request({"prompt": "a", "regex": "a+"}).regex == "a+"
    completion = parse_completion_request({"prompt": "a", "structured_outputs": {"regex": "b"}})
    assert completion.regex == "b"
    generate = parse_generate_request({"text": "a", "sampling_params": {"regex": "(x|y)"}})
    assert generate.regex == "(x|y)" and generate.json_schema is None


def test_workers_dialect_has_no_regex() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "regex": "(a"}
    assert parse_chat_request(body, dialect="workers").regex is None


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            chat(regex="a{2,1}"),
            "/regex",
            "got quantifier {2,1} at offset 1 (the maximum is below the minimum) in 'a{2,1}'",
        ),
        (chat(regex=5), "/regex", "expected a regular expression (a string), got a number (5)"),
        (
            chat(structured_outputs={"regex": "(?<=a)b"}),
            "/structured_outputs/regex",
            "got lookbehind (?<= at offset 0 in '(?<=a)b'",
        ),
        (
            chat(regex="a", guided_regex="b"),
            "/guided_regex",
            "expected one regex (already given at '/regex'), got a second one",
        ),
        (
            chat(regex="a", response_format={"type": "json_object"}),
            "/response_format",
            "expected no JSON format beside a regex (one grammar per request), got both",
        ),
        (
            chat(regex="a", tools=[WEATHER], tool_choice="required"),
            "/tool_choice",
            "expected 'auto' or 'none' beside a regex (forced tool calls are a grammar of their "
            "own), got forced tool calls",
        ),
    ],
)
def test_chat_regex_errors_name_the_field(body: dict, field: str, message: str) -> None:
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(body)
    assert caught.value.field == field
    assert message in str(caught.value)


def test_completion_regex_errors_name_the_field() -> None:
    with pytest.raises(InvalidRequestField) as caught:
        parse_completion_request({"prompt": "a", "regex": "(?i)a"})
    assert caught.value.field == "/regex"
    assert "inline flags or group modifier '(?' at offset 0" in str(caught.value)
    with pytest.raises(InvalidRequestField) as caught:
        parse_completion_request(
            {"prompt": "a", "regex": "a", "response_format": {"type": "json_object"}}
        )
    assert caught.value.field == "/response_format"


@pytest.mark.parametrize(
    ("parse", "body", "field"),
    [
        (parse_chat_request, chat(regex="(?:a?b?){500}" * 3), "/regex"),
        (
            parse_generate_request,
            {"text": "a", "sampling_params": {"regex": "(?:a?b?){500}" * 3}},
            "/sampling_params/regex",
        ),
    ],
)
def test_a_regex_past_the_automaton_budget_is_refused_naming_the_field(
    parse: object, body: dict, field: str
) -> None:
    # 39 characters whose closures span every optional item: ~4,000,000 units, seconds of CPU
    # when the request's regex was compiled with no budget at all.
    with pytest.raises(InvalidRequestField) as caught:
        parse(body)  # type: ignore[operator]
    assert caught.value.field == field
    assert "600,000 units of automaton work" in str(caught.value)
