# ruff: noqa: E501  (tables of exact request bodies, outputs and messages read best unwrapped)
"""Chat requests: an error naming the field for every kind of bad input, in Workers AI's and
OpenAI's shapes."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.errors import (
    InvalidRequestField,
    openai_error_for_invalid_input,
    workers_message_for_invalid_input,
)
from tests.models.api.chat_bodies import BASE, WEATHER
from tests.models.api.chat_bodies import with_fields as _with


@pytest.mark.parametrize(
    ("body", "dialect", "field", "message", "code"),
    [
        (
            {"model": "m"},
            "openai",
            "/messages",
            "expected an array of messages, got nothing",
            "missing_required_parameter",
        ),
        (
            _with(messages=[]),
            "openai",
            "/messages",
            "expected a non-empty array of messages, got an array of 0 items",
            "invalid_type",
        ),
        (
            _with(messages=[{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]),
            "openai",
            "/messages/1/role",
            "expected one of 'system', 'developer', 'user', 'assistant', 'tool', got a string ('robot')",
            "invalid_value",
        ),
        (
            _with(
                messages=[
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b"},
                    {"role": "user", "content": 5},
                ]
            ),
            "openai",
            "/messages/2/content",
            "expected a string or an array of content parts, got a number (5)",
            "invalid_type",
        ),
        (
            _with(
                messages=[
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ]
            ),
            "openai",
            "/messages/0/content/0/type",
            "expected 'text' (this model reads text only), got a string ('image_url')",
            "invalid_value",
        ),
        (
            _with(messages=[{"role": "tool", "content": "r"}]),
            "openai",
            "/messages/0/tool_call_id",
            "expected the id of the tool call this answers, got null",
            "missing_required_parameter",
        ),
        (
            _with(
                messages=[
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"id": "c", "function": {"name": "f", "arguments": "not json"}}
                        ],
                    }
                ]
            ),
            "openai",
            "/messages/0/tool_calls/0/function/arguments",
            "expected a JSON object encoded as a string, got a string ('not json')",
            "invalid_value",
        ),
        (
            _with(temperature=2.5),
            "openai",
            "/temperature",
            "expected a number >= 0 and <= 2, got 2.5",
            "invalid_value",
        ),
        (
            _with(temperature="hot"),
            "openai",
            "/temperature",
            "expected a number, got a string ('hot')",
            "invalid_type",
        ),
        (
            _with(top_p=1.5),
            "openai",
            "/top_p",
            "expected a number >= 0 and <= 1, got 1.5",
            "invalid_value",
        ),
        (
            _with(max_completion_tokens=0),
            "openai",
            "/max_completion_tokens",
            "expected an integer >= 1, got 0",
            "invalid_value",
        ),
        (
            _with(max_tokens=1.5),
            "openai",
            "/max_tokens",
            "expected an integer, got a number (1.5)",
            "invalid_type",
        ),
        (
            _with(repetition_penalty=0),
            "openai",
            "/repetition_penalty",
            "expected a number > 0 and <= 2, got 0",
            "invalid_value",
        ),
        (
            _with(stop=["a", "b", "c", "d", "e"]),
            "openai",
            "/stop",
            "expected a string or an array of at most 4 strings, got an array of 5 items",
            "invalid_type",
        ),
        (
            _with(stop=["a", ""]),
            "openai",
            "/stop/1",
            "expected a non-empty string, got a string ('')",
            "invalid_type",
        ),
        (
            _with(n=129),
            "openai",
            "/n",
            "expected an integer >= 1 and <= 128, got 129",
            "invalid_value",
        ),
        (
            _with(top_logprobs=2),
            "openai",
            "/logprobs",
            "expected true when top_logprobs is set, got null",
            "invalid_value",
        ),
        (
            _with(top_logprobs=21, logprobs=True),
            "openai",
            "/top_logprobs",
            "expected an integer >= 0 and <= 20, got 21",
            "invalid_value",
        ),
        (
            _with(stream_options={"include_usage": True}),
            "openai",
            "/stream_options",
            "expected no stream_options unless stream is true, got an object",
            "invalid_value",
        ),
        (
            _with(tools=[{"type": "custom", "custom": {"name": "sql"}}]),
            "openai",
            "/tools/0/type",
            "expected 'function' (custom tools with free-form or grammar input are not supported), got 'custom'",
            "unsupported_value",
        ),
        (
            _with(tools=[{"type": "function", "function": {"name": "bad name"}}]),
            "openai",
            "/tools/0/function/name",
            "expected a function name of 1-64 letters, digits, '_' or '-', got a string ('bad name')",
            "invalid_value",
        ),
        (
            _with(tools=[WEATHER, WEATHER]),
            "openai",
            "/tools/1/function/name",
            "expected a name no other tool has, got 'get_weather'",
            "invalid_value",
        ),
        (
            _with(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}),
            "openai",
            "/tool_choice/function/name",
            "expected the name of a declared tool (get_weather), got a string ('nope')",
            "invalid_value",
        ),
        (
            _with(tool_choice="required"),
            "openai",
            "/tool_choice",
            "expected 'none' or 'auto' when no tools are declared, got 'required'",
            "invalid_value",
        ),
        (
            _with(tool_choice="sometimes", tools=[WEATHER]),
            "openai",
            "/tool_choice",
            "expected 'none', 'auto', 'required' or a named function, got a string ('sometimes')",
            "invalid_value",
        ),
        (
            _with(response_format={"type": "xml"}),
            "openai",
            "/response_format/type",
            "expected 'text', 'json_object' or 'json_schema', got a string ('xml')",
            "invalid_value",
        ),
        (
            _with(
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "a(?!b)"}},
                }
            ),
            "openai",
            "/response_format/json_schema/schema/pattern",
            "expected a regular expression in ember's subset (literals, escapes, '.', classes, "
            "\\d \\w \\s, quantifiers, groups, alternation, '^' and '$' at the ends), got "
            "negative lookahead (?! at offset 1 in 'a(?!b)'",
            "unsupported_value",
        ),
        (
            _with(chat_template_kwargs={"enable_thinking": "yes"}),
            "openai",
            "/chat_template_kwargs/enable_thinking",
            "expected true or false, got a string ('yes')",
            "invalid_type",
        ),
        (
            _with(reasoning_effort="extreme"),
            "openai",
            "/reasoning_effort",
            "expected one of 'none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max', got a string ('extreme')",
            "invalid_value",
        ),
        (
            _with(functions=[{"name": "f"}]),
            "openai",
            "/functions",
            "expected 'tools' and 'tool_choice' (the legacy functions API is not supported), got a value",
            "unsupported_parameter",
        ),
        (
            {"prompt": "a", "messages": BASE["messages"]},
            "workers",
            "/",
            "expected exactly one of 'messages' or 'prompt', got both",
            "missing_required_parameter",
        ),
        (
            {"temperature": 1},
            "workers",
            "/",
            "expected exactly one of 'messages' or 'prompt', got neither",
            "missing_required_parameter",
        ),
        (  # the Responses API's shape (gpt-oss on Workers AI, python-workers-examples 09)
            {"instructions": "Be brief.", "input": "hi"},
            "workers",
            "/",
            "expected exactly one of 'messages' or 'prompt', got neither ('instructions' and "
            "'input' are the Responses API's shape, which Workers AI takes for its gpt-oss "
            "models: for this model send messages=[{'role': 'system', 'content': "
            "instructions}, {'role': 'user', 'content': input}], or use /ai/v1/responses)",
            "missing_required_parameter",
        ),
        (
            {"prompt": ""},
            "workers",
            "/prompt",
            "expected a non-empty string, got a string ('')",
            "invalid_type",
        ),
        ([1, 2], "workers", "/", "expected an object, got an array of 2 items", "invalid_type"),
        # Out of range, the right type: the value itself (0 is an integer, not "a number").
        (
            {"prompt": "a", "max_tokens": 0},
            "workers",
            "/max_tokens",
            "expected an integer >= 1, got 0",
            "invalid_value",
        ),
    ],
)
def test_invalid_fields_are_named(
    body: object, dialect: str, field: str, message: str, code: str
) -> None:
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(body, dialect=dialect)  # type: ignore[arg-type]
    error = caught.value
    assert (error.field, error.code) == (field, code)
    assert str(error) == f"Invalid value at '{field}': {message}"


def test_errors_map_to_workers_and_openai_shapes() -> None:
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(
            _with(
                messages=[
                    {"role": "user", "content": "a"},
                    {"role": "user", "content": "b"},
                    {"role": "user", "content": 5},
                ]
            )
        )
    assert workers_message_for_invalid_input(caught.value) == (
        "5006: Error: Invalid value at '/messages/2/content': expected a string or an array of "
        "content parts, got a number (5)"
    )
    assert openai_error_for_invalid_input(caught.value) == {
        "error": {
            "message": "Invalid value at '/messages/2/content': expected a string or an array of content parts, got a number (5)",
            "type": "invalid_request_error",
            "param": "messages.[2].content",
            "code": "invalid_type",
        }
    }
