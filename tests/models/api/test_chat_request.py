# ruff: noqa: E501  (tables of exact request bodies, outputs and messages read best unwrapped)
"""Chat requests from OpenAI bodies and Workers AI family-B inputs: values, defaults, and an
error naming the field for every kind of bad input."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import SamplingOptions, parse_chat_request
from ember.models.api.constraints import constraint_for, output_parser_for
from ember.models.api.errors import (
    InvalidRequestField,
    openai_error_for_invalid_input,
    workers_message_for_invalid_input,
)
from ember.models.api.messages import ChatMessage, ContentPart, HistoryToolCall
from ember.models.api.tools import FunctionTool, ResponseFormat, ToolChoice
from ember.models.constrain.tool_grammars import ToolSignature

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def test_a_full_openai_body() -> None:
    request = parse_chat_request(
        {
            "model": "@cf/zai-org/glm-4.7-flash",
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Weather "},
                        {"type": "text", "text": "in Paris?"},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
            ],
            "max_completion_tokens": 64,
            "max_tokens": 10,
            "temperature": 0.2,
            "top_p": 0.9,
            "top_k": 20,
            "seed": 7,
            "stop": "###",
            "frequency_penalty": 0.5,
            "presence_penalty": -0.5,
            "repetition_penalty": 1.1,
            "logprobs": True,
            "top_logprobs": 3,
            "logit_bias": {"42": -100},
            "tools": [WEATHER],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": False,
            "chat_template_kwargs": {"enable_thinking": False, "clear_thinking": True, "custom": 1},
            "reasoning_effort": "low",
            "stream": True,
            "stream_options": {"include_usage": True},
            "user": "u1",
            "metadata": {"ignored": "as OpenAI ignores unknown fields"},
            "some_future_field": 1,
        }
    )
    assert request.model == "@cf/zai-org/glm-4.7-flash"
    assert request.messages == (
        ChatMessage("developer", "Be brief."),
        ChatMessage("user", (ContentPart("text", "Weather "), ContentPart("text", "in Paris?"))),
        ChatMessage(
            "assistant",
            None,
            tool_calls=(HistoryToolCall("call_1", "get_weather", {"city": "Paris"}),),
        ),
        ChatMessage("tool", "18C", tool_call_id="call_1"),
    )
    assert request.sampling == SamplingOptions(
        max_tokens=64,
        temperature=0.2,
        top_p=0.9,
        top_k=20,
        seed=7,
        stop=("###",),
        frequency_penalty=0.5,
        presence_penalty=-0.5,
        repetition_penalty=1.1,
        logit_bias={42: -100.0},
        logprobs=True,
        top_logprobs=3,
    )
    assert request.tools == (
        FunctionTool("get_weather", "Weather for a city", WEATHER["function"]["parameters"]),
    )
    assert request.tool_choice == ToolChoice("required", ("get_weather",))
    assert request.tool_choice.forced_name == "get_weather"
    assert (request.enable_thinking, request.clear_thinking, request.reasoning_effort) == (
        False,
        True,
        "low",
    )
    assert request.template_arguments() == {
        "custom": 1,
        "enable_thinking": False,
        "clear_thinking": True,
        "reasoning_effort": "low",
    }
    assert request.stream and request.include_usage and request.user == "u1"
    assert request.template_messages()[0] == {"role": "system", "content": "Be brief."}
    assert request.template_messages()[2]["tool_calls"][0]["function"]["arguments"] == {
        "city": "Paris"
    }
    assert request.template_tools() == [WEATHER]


def test_workers_defaults_and_prompt_form() -> None:
    request = parse_chat_request({"prompt": "Hello"}, dialect="workers")
    assert request.messages == (ChatMessage("user", "Hello"),) and request.from_prompt
    assert request.sampling == SamplingOptions()
    assert request.sampling.temperature == 1.0 and request.sampling.top_p == 1.0
    assert request.tool_choice == ToolChoice("none") and request.parallel_tool_calls
    assert request.enable_thinking and not request.clear_thinking
    assert request.response_format == ResponseFormat() and request.model is None
    with_tools = parse_chat_request(
        {"messages": [{"role": "user", "content": "x"}], "tools": [WEATHER]}, dialect="workers"
    )
    assert with_tools.tool_choice == ToolChoice("auto")
    assert (
        parse_chat_request({"prompt": "x", "max_tokens": 5}, dialect="workers").sampling.max_tokens
        == 5
    )


def test_response_format_shapes() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    openai = parse_chat_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "c", "schema": schema, "strict": True},
            },
        }
    )
    assert openai.response_format == ResponseFormat("json_schema", schema, "c", True)
    # Workers AI's docs put the schema directly under json_schema.
    workers = parse_chat_request(
        {"prompt": "x", "response_format": {"type": "json_schema", "json_schema": schema}},
        dialect="workers",
    )
    assert workers.response_format == ResponseFormat("json_schema", schema)
    assert parse_chat_request(
        {"prompt": "x", "response_format": {"type": "json_object"}}, dialect="workers"
    ).response_format == ResponseFormat("json_object")


BASE = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _with(**fields: object) -> dict:
    return {**BASE, **fields}


@pytest.mark.parametrize(
    ("body", "dialect", "field", "message", "code"),
    [
        (
            {"messages": BASE["messages"]},
            "openai",
            "/model",
            "expected the model's id, got nothing",
            "missing_required_parameter",
        ),
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
            "expected a number >= 0 and <= 2, got a number (2.5)",
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
            "expected a number >= 0 and <= 1, got a number (1.5)",
            "invalid_value",
        ),
        (
            _with(max_completion_tokens=0),
            "openai",
            "/max_completion_tokens",
            "expected an integer >= 1, got a number (0)",
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
            "expected a number > 0 and <= 2, got a number (0)",
            "invalid_value",
        ),
        (
            _with(stop=["a", "b", "c", "d", "e"]),
            "openai",
            "/stop",
            "expected a string or an array of 1 to 4 strings, got an array of 5 items",
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
            _with(n=2),
            "openai",
            "/n",
            "expected 1 (ember generates one choice per request; send several requests), got a number (2)",
            "unsupported_value",
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
            "expected an integer >= 0 and <= 20, got a number (21)",
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
                    "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "a+"}},
                }
            ),
            "openai",
            "/response_format/json_schema/schema/pattern",
            "expected a schema keyword ember can enforce while generating (see the supported JSON Schema subset), got 'pattern'",
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
        (
            {"prompt": ""},
            "workers",
            "/prompt",
            "expected a non-empty string, got a string ('')",
            "invalid_type",
        ),
        ([1, 2], "workers", "/", "expected an object, got an array of 2 items", "invalid_type"),
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


def test_constraint_and_parser_follow_tool_choice_and_response_format() -> None:
    free = parse_chat_request(_with(tools=[WEATHER]))
    assert constraint_for(free, tool_format="kimi", reasoning="off") is None
    assert output_parser_for(free, tool_format="kimi", reasoning="off").tools is not None
    required = parse_chat_request(_with(tools=[WEATHER], tool_choice="required"))
    spec = constraint_for(required, tool_format="glm47", reasoning="inside")
    assert (
        spec is not None and spec.tools_required and spec.json is None and spec.parallel_tool_calls
    )
    assert spec.tools == (ToolSignature("get_weather", WEATHER["function"]["parameters"]),)
    assert spec.reasoning == "inside"
    named = parse_chat_request(
        _with(
            tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}}
        )
    )
    assert not constraint_for(named, tool_format="kimi", reasoning="off").parallel_tool_calls  # type: ignore[union-attr]
    none = parse_chat_request(
        _with(tools=[WEATHER], tool_choice="none", response_format={"type": "json_object"})
    )
    spec = constraint_for(none, tool_format="kimi", reasoning="off")
    assert spec is not None and spec.json == "object" and spec.tools == ()
    assert output_parser_for(none, tool_format="kimi", reasoning="off").tools is None
